package admin

import (
	"fmt"
	"net/http"
	"strconv"
)

// streamingAsked reads /readyz's streaming parameter: absent or false, /readyz
// counts a healthy standby as ready (Relay.Available), the answer a Kubernetes
// readiness probe needs for a pair; present (empty, 1 or true), it answers whether
// the relay moves events itself (Relay.Ready). docs/operations.md, "Health".
func streamingAsked(w http.ResponseWriter, req *http.Request) (streaming, ok bool) {
	q := req.URL.Query()
	if !q.Has("streaming") {
		return false, true
	}
	v := q.Get("streaming")
	if v == "" {
		return true, true
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, "streaming=%q: want true or false (or streaming alone for true)\n", v)
		return false, false
	}
	return b, true
}

// writeReady writes one readiness answer: 200 or 503, and why.
func writeReady(w http.ResponseWriter, ready bool, why string) {
	if !ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintln(w, why)
}
