package relay

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// A URL narrowed to one of its servers reaches that server alone, whatever its role.
func TestPinURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		s    server
		host string
		port uint16
	}{
		{"postgres://relay:pw@db-1:5432,db-2:5433/app?sslmode=disable&target_session_attrs=prefer-standby",
			server{"db-2", 5433}, "db-2", 5433},
		{"postgres://relay@db-1,db-2/app?target_session_attrs=read-write", server{"db-1", 5432}, "db-1", 5432},
		{"postgresql://relay@[::1]:5432,db-2/app", server{"::1", 5432}, "::1", 5432},
		{"postgres://relay@/app?host=/run/a,/run/b&port=5432", server{"/run/b", 5432}, "/run/b", 5432},
		{"host=db-1,db-2 port=5432,5433 user=relay dbname=app target_session_attrs=standby", server{"db-1", 5432}, "db-1", 5432},
		{"host=db-1,db-2 user=relay dbname=app", server{"it's", 6000}, "it's", 6000},
	} {
		pinned := pinURL(tc.url, tc.s)
		cfg, err := pgconn.ParseConfig(pinned)
		if err != nil {
			t.Errorf("pinURL(%q) = %q: %v", tc.url, pinned, err)
			continue
		}
		if cfg.Host != tc.host || cfg.Port != tc.port || cfg.ValidateConnect != nil {
			t.Errorf("pinURL(%q) = %q reaches %s:%d (checked: %v), want %s:%d of any role", tc.url, pinned, cfg.Host,
				cfg.Port, cfg.ValidateConnect != nil, tc.host, tc.port)
		}
		for _, fb := range cfg.Fallbacks {
			if fb.Host != tc.host || fb.Port != tc.port {
				t.Errorf("pinURL(%q) = %q falls back to %s:%d", tc.url, pinned, fb.Host, fb.Port)
			}
		}
		if strings.Contains(tc.url, "pw") && cfg.Password != "pw" {
			t.Errorf("pinURL(%q) = %q lost the password", tc.url, pinned)
		}
	}
}

// The servers a URL names, once each (sslmode=prefer lists each twice), in order.
func TestURLServers(t *testing.T) {
	got := urlServers("postgres://relay@db-2:5433,db-1/app?sslmode=prefer")
	if len(got) != 2 || got[0] != (server{"db-2", 5433}) || got[1] != (server{"db-1", 5432}) {
		t.Errorf("urlServers = %v, want [db-2:5433 db-1:5432]", got)
	}
	if got := urlServers("postgres://relay@db-1/app"); len(got) != 1 {
		t.Errorf("urlServers of one server = %v", got)
	}
}

// read-write and primary follow the primary; the other settings do not.
func TestFollowsPrimary(t *testing.T) {
	for tsa, want := range map[string]bool{"read-write": true, "primary": true, "prefer-standby": false, "standby": false,
		"read-only": false, "any": false, "": false} {
		url := "postgres://relay@db-1,db-2/app"
		if tsa != "" {
			url += "?target_session_attrs=" + tsa
		}
		if got := followsPrimary(url); got != want {
			t.Errorf("followsPrimary(target_session_attrs=%q) = %v, want %v", tsa, got, want)
		}
	}
	if !followsPrimary("host=db-1,db-2 dbname=app target_session_attrs=read-write") {
		t.Error("followsPrimary misses read-write in keyword/value form")
	}
}

// Where a session decodes: where the slot is; with no slot anywhere, on the server
// the URL prefers once every server answered; a URL that follows the primary, on
// the primary.
func TestChooseServer(t *testing.T) {
	down := errors.New("connection refused")
	standby := serverProbe{server: server{"standby", 5432}, inRecovery: true}
	primary := serverProbe{server: server{"primary", 5432}, rank: rankFallback}
	with := func(p serverProbe, f func(*serverProbe)) serverProbe { f(&p); return p }
	slot := func(p *serverProbe) { p.hasSlot = true }
	isDown := func(p *serverProbe) { p.err = down }
	for _, tc := range []struct {
		name    string
		probes  []serverProbe
		follow  bool
		want    int
		waitFor string
	}{
		{"no slot, both up: the preferred standby", []serverProbe{primary, standby}, false, 1, ""},
		{"slot on the standby", []serverProbe{with(standby, slot), primary}, false, 0, ""},
		{"slot on the primary, standby up", []serverProbe{standby, with(primary, slot)}, false, 1, ""},
		{"standby down, no slot on the primary: wait", []serverProbe{with(standby, isDown), primary}, false, -1,
			"server standby:5432 of --database-url does not answer"},
		{"standby down, slot on the primary (a promotion)", []serverProbe{with(standby, isDown), with(primary, slot)}, false, 1, ""},
		{"slots on both: the preferred one", []serverProbe{with(primary, slot), with(standby, slot)}, false, 1, ""},
		{"the only server is refused", []serverProbe{with(standby, func(p *serverProbe) { p.rank = rankRefused })}, false, -1,
			"is of the kind"},
		{"follows the primary: a standby's slot does not count",
			[]serverProbe{with(standby, func(p *serverProbe) { p.rank = rankRefused; p.hasSlot = true }),
				with(primary, func(p *serverProbe) { p.rank = rankWanted })}, true, 1, ""},
		{"follows the primary, old primary down", []serverProbe{with(primary, isDown),
			with(standby, func(p *serverProbe) { p.inRecovery = false })}, true, 1, ""},
		{"follows the primary, none takes writes", []serverProbe{with(primary, isDown),
			with(standby, func(p *serverProbe) { p.rank = rankRefused })}, true, -1, "takes writes"},
		{"follows the primary, the standby promoted between the probe's two questions",
			[]serverProbe{with(primary, isDown), standby}, true, -1, "takes writes"},
	} {
		got, why := chooseServer(tc.probes, tc.follow, "walrelay")
		if got != tc.want || (tc.waitFor != "" && !strings.Contains(why, tc.waitFor)) || (got >= 0) != (why == "") {
			t.Errorf("%s: chooseServer = %d, %q; want %d, %q", tc.name, got, why, tc.want, tc.waitFor)
		}
	}
}
