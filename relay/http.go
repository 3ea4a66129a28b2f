package relay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// serveHTTP serves /metrics, /healthz and /readyz, and the admin API (and the
// profiler) behind adminGuard, until ctx ends.
func (r *Relay) serveHTTP(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(r.gatherer, promhttp.HandlerOpts{Registry: r.registerer}))
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		ready, why := r.Ready()
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(w, why)
	})
	guard := adminGuard(r.cfg.AdminToken, r.cfg.AdminHosts, ln.Addr(), r.log)
	adminHandlers(ctx, mux, guard, []Member{{Relay: r}})
	return serve(ctx, ln, mux, r.cfg.Pprof, guard)
}

// serve adds /healthz (and the profiler with pprof, behind guard, as the admin
// API) to mux and serves it on ln until ctx ends.
func serve(ctx context.Context, ln net.Listener, mux *http.ServeMux, withPprof bool, guard func(http.Handler) http.Handler) error {
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	if withPprof {
		mux.Handle("/debug/pprof/", guard(http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/profile", guard(http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/symbol", guard(http.HandlerFunc(pprof.Symbol)))
		mux.Handle("/debug/pprof/trace", guard(http.HandlerFunc(pprof.Trace)))
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics server: %w", err)
	}
	return nil
}

// Ready reports whether the relay is connected and moving events, and why not.
func (r *Relay) Ready() (bool, string) {
	switch down, waiting := r.brokerDown.Load(), r.waiting.Load(); {
	case r.pause.Paused():
		return false, "paused: resume with walrelay resume or POST /resume"
	case down != nil:
		return false, *down
	case r.stalled.Load():
		return false, "stalled: slot lag grows while the confirmed LSN does not move"
	case waiting != nil:
		return false, *waiting
	case r.standby.Load():
		return false, "standby: another instance streams slot " + r.cfg.Slot
	case !r.active.Load():
		if r.cfg.Mode == ModePoll {
			return false, "not polling: the last poll failed or none ran yet"
		}
		return false, "not streaming: connecting to PostgreSQL or Kafka"
	case r.cfg.Mode == ModePoll:
		return true, "polling"
	default:
		return true, "streaming"
	}
}
