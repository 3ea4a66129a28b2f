package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// A Group runs one relay per database in one process (docs/configuration.md,
// "Several databases"). Each relay streams its database under that database's own
// leadership lock, as a relay of its own would, so several processes running the
// same group share its databases; one listener serves them all, their metrics
// labelled database="NAME".
type Group struct {
	cfg      GroupConfig
	members  []Member
	registry *prometheus.Registry

	mu struct {
		sync.Mutex
		failed map[string]error // members whose Run returned an error, by name
	}
}

// GroupConfig is what the relays of a Group share: the listener, its admin token
// and the logger.
type GroupConfig struct {
	// MetricsAddr, when set, serves /metrics, /healthz, /readyz and the admin API of
	// every database there.
	MetricsAddr string
	// Pprof also serves Go's profiler under /debug/pprof/ on MetricsAddr.
	Pprof bool
	// AdminToken is the bearer token the admin API asks for (Config.AdminToken).
	AdminToken string
	// AdminHosts are names the admin API answers requests to (Config.AdminHosts).
	AdminHosts []string
	Logger     *slog.Logger
}

// Database is one database of a Group: Name labels its metrics and logs and is
// how the admin API and /readyz address it.
type Database struct {
	Name   string
	Config Config
}

// Member is one relay of a Group, by its database's name.
type Member struct {
	Name  string
	Relay *Relay
}

// databaseName is what a database's name may be: it is a metric label value, a
// query parameter and a word in the logs.
var databaseName = regexp.MustCompile(`^[a-z0-9_-]+$`)

// CheckDatabaseName says what is wrong with name as a Database's Name, or nil.
func CheckDatabaseName(name string) error {
	switch {
	case name == "":
		return errors.New("name is missing; give each database a name of lowercase letters, digits, _ and -, e.g. name: billing")
	case !databaseName.MatchString(name):
		return fmt.Errorf("name %q: use lowercase letters, digits, _ and - only, e.g. %s", name, suggestName(name))
	}
	return nil
}

// suggestName is name with what CheckDatabaseName refuses lowered or replaced.
func suggestName(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// NewGroup validates every database's configuration and builds its relay, its
// metrics registered on one registry under the label database="NAME". Config's
// MetricsAddr, Pprof, AdminToken, AdminHosts, Registry and Gatherer are the group's to set.
func NewGroup(cfg GroupConfig, dbs []Database) (*Group, error) {
	if len(dbs) == 0 {
		return nil, errors.New("a group needs at least one database")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := checkAdminHosts(cfg.AdminHosts); err != nil {
		return nil, err
	}
	g := &Group{cfg: cfg, registry: newRegistry()}
	g.mu.failed = map[string]error{}
	seen := map[string]bool{}
	var errs []error
	for i, db := range dbs {
		if err := CheckDatabaseName(db.Name); err != nil {
			errs = append(errs, fmt.Errorf("database %d: %w", i, err))
			continue
		}
		if seen[db.Name] {
			errs = append(errs, fmt.Errorf("database %d: name %s is taken by another; give each database a name of its own", i, db.Name))
			continue
		}
		seen[db.Name] = true
		c := db.Config
		c.MetricsAddr, c.Pprof, c.AdminToken, c.AdminHosts = "", false, cfg.AdminToken, cfg.AdminHosts
		c.Registry = prometheus.WrapRegistererWith(prometheus.Labels{"database": db.Name}, g.registry)
		c.Gatherer = g.registry
		r, err := New(c)
		if err != nil {
			errs = append(errs, fmt.Errorf("database %s: %w", db.Name, err))
			continue
		}
		g.members = append(g.members, Member{Name: db.Name, Relay: r})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return g, nil
}

// Members are the group's relays, in the order their databases were given.
func (g *Group) Members() []Member { return g.members }

// Run runs every relay until ctx ends and serves them on MetricsAddr. A relay
// whose Run fails (a setup error: see Relay.Run) stops alone: the others go on,
// /readyz reports it, and Run returns its error once every relay has stopped.
func (g *Group) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var served chan error
	if g.cfg.MetricsAddr != "" {
		ln, err := net.Listen("tcp", g.cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("listen for metrics on %s (choose another --metrics-addr): %w", g.cfg.MetricsAddr, err)
		}
		g.cfg.Logger.Info("serving /metrics, /healthz and /readyz, and the admin API", "addr", ln.Addr().String(),
			"databases", len(g.members))
		served = make(chan error, 1)
		guard := adminGuard(g.cfg.AdminToken, g.cfg.AdminHosts, ln.Addr(), g.cfg.Logger)
		go func() { served <- serve(ctx, ln, g.mux(ctx, guard), g.cfg.Pprof, guard) }()
	}
	var wg sync.WaitGroup
	errs := make([]error, len(g.members))
	for i, m := range g.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Relay.Run(ctx); err != nil {
				m.Relay.log.Error("this database's relay stopped; the other databases go on", "err", err)
				g.mu.Lock()
				g.mu.failed[m.Name] = err
				g.mu.Unlock()
				errs[i] = fmt.Errorf("database %s: %w", m.Name, err)
			}
		}()
	}
	wg.Wait()
	cancel()
	if served != nil {
		if err := <-served; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// mux routes the group's endpoints: one /metrics for all, /readyz for all or one
// (?database=NAME), and the admin API addressed by ?database=NAME, behind guard.
func (g *Group) mux(ctx context.Context, guard func(http.Handler) http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g.registry, promhttp.HandlerOpts{Registry: g.registry}))
	mux.HandleFunc("/readyz", g.serveReady)
	adminHandlers(ctx, mux, guard, g.members)
	return mux
}

// serveReady answers /readyz: with ?database=NAME that database's readiness, as a
// relay of its own answers; without, one line per database, and 200 when each is
// ready or waiting as a standby for another instance to release it.
func (g *Group) serveReady(w http.ResponseWriter, req *http.Request) {
	if name := req.URL.Query().Get("database"); name != "" {
		for _, m := range g.members {
			if m.Name == name {
				ready, why := g.ready(m)
				if !ready {
					w.WriteHeader(http.StatusServiceUnavailable)
				}
				fmt.Fprintln(w, why)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "no database %q here; the relay runs %s\n", name, strings.Join(g.names(), ", "))
		return
	}
	var b strings.Builder
	all := true
	for _, m := range g.members {
		ready, why := g.ready(m)
		if !ready && !m.Relay.standby.Load() {
			all = false
		}
		fmt.Fprintf(&b, "%s: %s\n", m.Name, why)
	}
	if !all {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprint(w, b.String())
}

// ready is m's readiness: its relay's, or why it stopped.
func (g *Group) ready(m Member) (bool, string) {
	g.mu.Lock()
	err := g.mu.failed[m.Name]
	g.mu.Unlock()
	if err != nil {
		return false, "stopped: " + err.Error()
	}
	return m.Relay.Ready()
}

func (g *Group) names() []string {
	names := make([]string, len(g.members))
	for i, m := range g.members {
		names[i] = m.Name
	}
	return names
}
