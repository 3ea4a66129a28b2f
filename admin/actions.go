package admin

import (
	"log/slog"
	"net/http"
)

// logged writes one log line per admin action (every request that changes
// something: POST), with the address it came from (clientaddr.go), the database
// and the answer's status, so that who paused, retried, purged or replayed can be
// found afterwards.
func logged(log *slog.Logger, proxies trustedProxies, database string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet || req.Method == http.MethodHead {
			h.ServeHTTP(w, req)
			return
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, req)
		attrs := []any{"method", req.Method, "path", req.URL.Path, "remote_addr", proxies.remoteAddr(req), "status", rec.status}
		if database != "" {
			attrs = append(attrs, "database", database)
		}
		log.Info("admin action", attrs...)
	})
}

// statusRecorder remembers the status a handler answered.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}
