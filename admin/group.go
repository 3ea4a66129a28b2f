package admin

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/walrelay/walrelay/relay"
)

// groupMux routes a group's endpoints: one /metrics for all, /readyz for all or
// one (?database=NAME), and the admin API addressed by ?database=NAME, behind guard.
func groupMux(ctx context.Context, g *relay.Group, guard func(http.Handler) http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsHandler(g.Gatherer(), g.Registerer()))
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, req *http.Request) { serveGroupReady(g, w, req) })
	adminHandlers(ctx, mux, guard, g.Members())
	return mux
}

// serveGroupReady answers /readyz: with ?database=NAME that database's readiness,
// as a relay of its own answers; without, one line per database, and 200 when each
// is ready or waiting as a standby for another instance to release it.
func serveGroupReady(g *relay.Group, w http.ResponseWriter, req *http.Request) {
	if name := req.URL.Query().Get("database"); name != "" {
		for _, m := range g.Members() {
			if m.Name == name {
				ready, why := g.MemberReady(m)
				if !ready {
					w.WriteHeader(http.StatusServiceUnavailable)
				}
				fmt.Fprintln(w, why)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "no database %q here; the relay runs %s\n", name, strings.Join(memberNames(g.Members()), ", "))
		return
	}
	var b strings.Builder
	all := true
	for _, m := range g.Members() {
		ready, why := g.MemberReady(m)
		if !ready && !m.Relay.Standby() {
			all = false
		}
		fmt.Fprintf(&b, "%s: %s\n", m.Name, why)
	}
	if !all {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprint(w, b.String())
}

func memberNames(members []relay.Member) []string {
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = m.Name
	}
	return names
}
