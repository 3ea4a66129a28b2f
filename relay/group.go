package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// A Group runs one relay per database in one process (docs/configuration.md,
// "Several databases"). Each relay streams its database under that database's own
// leadership lock, as a relay of its own would, so several processes running the
// same group share its databases; their metrics are labelled database="NAME" on
// one registry, and one listener (admin.ServeGroup) serves them all.
type Group struct {
	cfg      GroupConfig
	members  []Member
	registry *prometheus.Registry

	mu struct {
		sync.Mutex
		failed map[string]error // members whose Run returned an error, by name
	}
}

// GroupConfig is what the relays of a Group share: the logger. The listener that
// serves them is admin.ServeGroup's.
type GroupConfig struct {
	Logger *slog.Logger
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
// Registry and Gatherer are the group's to set.
func NewGroup(cfg GroupConfig, dbs []Database) (*Group, error) {
	if len(dbs) == 0 {
		return nil, errors.New("a group needs at least one database")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
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

// Run runs every relay until ctx ends. A relay whose Run fails (a setup error: see
// Relay.Run) stops alone: the others go on, MemberReady (and so /readyz) reports
// it, and Run returns its error once every relay has stopped.
func (g *Group) Run(ctx context.Context) error {
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
	return errors.Join(errs...)
}

// Logger is the group's logger (GroupConfig.Logger).
func (g *Group) Logger() *slog.Logger { return g.cfg.Logger }

// Registerer is the registry every member's metrics are registered on.
func (g *Group) Registerer() prometheus.Registerer { return g.registry }

// Gatherer gathers every member's metrics, labelled database="NAME": what
// /metrics serves.
func (g *Group) Gatherer() prometheus.Gatherer { return g.registry }

// MemberReady is m's readiness: its relay's Ready, or why it stopped.
func (g *Group) MemberReady(m Member) (bool, string) { return g.member(m, (*Relay).Ready) }

// MemberAvailable is m's availability: its relay's Available, or why it stopped.
func (g *Group) MemberAvailable(m Member) (bool, string) { return g.member(m, (*Relay).Available) }

func (g *Group) member(m Member, answer func(*Relay) (bool, string)) (bool, string) {
	g.mu.Lock()
	err := g.mu.failed[m.Name]
	g.mu.Unlock()
	if err != nil {
		return false, "stopped: " + err.Error()
	}
	return answer(m.Relay)
}
