package admin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/walrelay/walrelay/relay"
)

// Serve serves r on opts.Addr until ctx ends: /metrics, /healthz and /readyz, and
// the admin API (and the profiler) behind the guard (guard.go). Run it beside
// r.Run, with the same ctx. It returns an error when the options are wrong or the
// address cannot be listened on, and nil once ctx ended.
func Serve(ctx context.Context, r *relay.Relay, opts Options) error {
	if opts.Addr == "" {
		return nil
	}
	if err := opts.Validate(); err != nil {
		return err
	}
	if r.Gatherer() == nil {
		return errors.New("metrics address set, but the registry cannot be gathered: set Config.Gatherer")
	}
	ln, err := listen(opts.Addr)
	if err != nil {
		return err
	}
	r.Logger().Info("serving /metrics, /healthz and /readyz, and the admin API and its console (/ui/)", "addr", ln.Addr().String())
	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsHandler(r.Gatherer(), r.Registerer()))
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, req *http.Request) {
		streaming, ok := streamingAsked(w, req)
		if !ok {
			return
		}
		answer := r.Available
		if streaming {
			answer = r.Ready
		}
		ready, why := answer()
		writeReady(w, ready, why)
	})
	guard := adminGuard(opts.Token, opts.Hosts, ln.Addr(), r.Logger())
	proxies, _ := parseTrustedProxies(opts.TrustedProxies) // Validate checked them
	adminHandlers(ctx, mux, guard, []relay.Member{{Relay: r}}, r.Logger(), proxies)
	consoleHandlers(mux, opts, ln.Addr())
	return serve(ctx, ln, mux, opts.Pprof, guard)
}

// ServeGroup serves g on opts.Addr until ctx ends: one /metrics for all its
// databases, /readyz for all or one (?database=NAME), and the admin API addressed
// by ?database=NAME. Run it beside g.Run, with the same ctx.
func ServeGroup(ctx context.Context, g *relay.Group, opts Options) error {
	if opts.Addr == "" {
		return nil
	}
	if err := opts.Validate(); err != nil {
		return err
	}
	ln, err := listen(opts.Addr)
	if err != nil {
		return err
	}
	g.Logger().Info("serving /metrics, /healthz and /readyz, and the admin API and its console (/ui/)", "addr", ln.Addr().String(),
		"databases", len(g.Members()))
	guard := adminGuard(opts.Token, opts.Hosts, ln.Addr(), g.Logger())
	proxies, _ := parseTrustedProxies(opts.TrustedProxies) // Validate checked them
	mux := groupMux(ctx, g, guard, proxies)
	consoleHandlers(mux, opts, ln.Addr())
	return serve(ctx, ln, mux, opts.Pprof, guard)
}

func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for metrics on %s (choose another --metrics-addr): %w", addr, err)
	}
	return ln, nil
}

// metricsHandler serves what gatherer gathers; promhttp counts its own errors on
// reg.
func metricsHandler(gatherer prometheus.Gatherer, reg prometheus.Registerer) http.Handler {
	return promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{Registry: reg})
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
