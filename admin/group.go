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
func groupMux(ctx context.Context, g *relay.Group, guard func(http.Handler) http.Handler, proxies trustedProxies) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsHandler(g.Gatherer(), g.Registerer()))
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, req *http.Request) { serveGroupReady(g, w, req) })
	adminHandlers(ctx, mux, guard, g.Members(), g.Logger(), proxies)
	return mux
}

// serveGroupReady answers /readyz: with ?database=NAME that database's answer, as
// a relay of its own gives it; without, one line per database, and 200 when each
// answers ready. Either way a healthy standby counts as ready unless ?streaming
// asks whether each streams (readyz.go).
func serveGroupReady(g *relay.Group, w http.ResponseWriter, req *http.Request) {
	streaming, ok := streamingAsked(w, req)
	if !ok {
		return
	}
	answer := g.MemberAvailable
	if streaming {
		answer = g.MemberReady
	}
	if name := req.URL.Query().Get("database"); name != "" {
		for _, m := range g.Members() {
			if m.Name == name {
				ready, why := answer(m)
				writeReady(w, ready, why)
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
		ready, why := answer(m)
		all = all && ready
		fmt.Fprintf(&b, "%s: %s\n", m.Name, why)
	}
	writeReady(w, all, strings.TrimSuffix(b.String(), "\n"))
}

func memberNames(members []relay.Member) []string {
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = m.Name
	}
	return names
}
