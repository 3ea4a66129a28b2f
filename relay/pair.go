package relay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/backoff"
	"github.com/walrelay/walrelay/internal/dbconn"
)

// A --database-url that names several servers (a primary and its standby, say)
// decodes on one of them per session, chosen by decodingServer: the slot, the
// leadership lock and the replication connection all go to that server, never to
// wherever the URL happens to land (docs/postgresql.md, "A URL that names both
// servers").

// pairProbeInterval is how often a relay that waits for its slot's server asks
// the servers again.
const pairProbeInterval = 2 * time.Second

// pairProbeTimeout bounds one server's answer to a probe: a server that does not
// answer within it counts as down.
const pairProbeTimeout = 5 * time.Second

// server is one server a database URL names.
type server struct {
	host string
	port uint16
}

func (s server) String() string { return net.JoinHostPort(s.host, strconv.Itoa(int(s.port))) }

// urlServers lists the distinct servers dbURL names, in its order.
func urlServers(dbURL string) []server {
	cfg, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		return nil
	}
	all := []server{{cfg.Host, cfg.Port}}
	for _, fb := range cfg.Fallbacks { // sslmode=prefer lists each server twice
		all = append(all, server{fb.Host, fb.Port})
	}
	var out []server
	for _, s := range all {
		seen := false
		for _, o := range out {
			seen = seen || o == s
		}
		if !seen {
			out = append(out, s)
		}
	}
	return out
}

// pinURL is dbURL narrowed to server s and any role (target_session_attrs=any), so
// that a connection reaches s whatever s is now: a standby that restarts is then
// down, not replaced by the primary, and a promoted one answers as what it is.
func pinURL(dbURL string, s server) string {
	port := strconv.Itoa(int(s.port))
	if scheme, rest, ok := strings.Cut(dbURL, "://"); ok && (scheme == "postgres" || scheme == "postgresql") {
		// The URL's host list (which net/url cannot parse when it holds an IPv6
		// literal) is replaced before parsing.
		end := strings.IndexAny(rest, "/?")
		if end < 0 {
			end = len(rest)
		}
		authority := "placeholder"
		if i := strings.LastIndex(rest[:end], "@"); i >= 0 {
			authority = rest[:i] + "@" + authority
		}
		u, err := url.Parse(scheme + "://" + authority + rest[end:])
		if err != nil {
			return dbURL
		}
		q := u.Query()
		q.Del("host")
		q.Del("port")
		if strings.HasPrefix(s.host, "/") { // a Unix socket directory
			u.Host = ""
			q.Set("host", s.host)
			q.Set("port", port)
		} else {
			u.Host = net.JoinHostPort(s.host, port)
		}
		q.Set("target_session_attrs", "any")
		u.RawQuery = q.Encode()
		return u.String()
	}
	quoted := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s.host)
	return dbURL + " host='" + quoted + "' port=" + port + " target_session_attrs=any" // the last setting counts
}

// followsPrimary says whether dbURL asks for the server that takes writes
// (target_session_attrs=read-write or primary): the failover setup, where the slot
// follows the primary (docs/operations.md, "Failover of the database").
func followsPrimary(dbURL string) bool {
	cfg, err := pgconn.ParseConfig(dbURL)
	if err != nil || cfg.ValidateConnect == nil {
		return false
	}
	// pgconn keeps the setting only as the check it implies.
	check := reflect.ValueOf(cfg.ValidateConnect).Pointer()
	return check == reflect.ValueOf(pgconn.ValidateConnectTargetSessionAttrsReadWrite).Pointer() ||
		check == reflect.ValueOf(pgconn.ValidateConnectTargetSessionAttrsPrimary).Pointer()
}

// How much the URL wants a server, as pgx would choose among them.
const (
	rankWanted   = iota // it passes target_session_attrs
	rankFallback        // it is taken only when no wanted one answers (prefer-standby's primary)
	rankRefused         // target_session_attrs refuses it
)

// serverProbe is what one server answered.
type serverProbe struct {
	server
	err        error // it did not answer
	inRecovery bool
	major      int
	feedback   bool
	hasSlot    bool // the relay's slot, not a synced copy of a failover slot
	rank       int
}

// probeServer asks s, a server of cfg.DatabaseURL, whether it answers, what it is, and
// whether it holds the slot; check is the URL's target_session_attrs check.
func probeServer(ctx context.Context, cfg Config, check pgconn.ValidateConnectFunc, s server) serverProbe {
	p := serverProbe{server: s}
	ctx, cancel := context.WithTimeout(ctx, pairProbeTimeout)
	defer cancel()
	conn, err := dbconn.Connect(ctx, pinURL(cfg.DatabaseURL, s), cfg.DatabasePassword)
	if err != nil {
		p.err = err
		return p
	}
	defer conn.Close(context.Background())
	var version int
	// A synced copy (PostgreSQL 17's failover slots, on a standby) cannot be decoded
	// from and goes with its primary's slot: it is not a second slot.
	err = conn.QueryRow(ctx, `SELECT pg_is_in_recovery(), current_setting('server_version_num')::int,
			current_setting('hot_standby_feedback')::bool,
			EXISTS (SELECT 1 FROM pg_replication_slots s WHERE s.slot_name = $1
				AND NOT coalesce((to_jsonb(s)->>'synced')::bool, false))`, cfg.Slot).
		Scan(&p.inRecovery, &version, &p.feedback, &p.hasSlot)
	if err != nil {
		p.err = fmt.Errorf("probe %s: %w", s, err)
		return p
	}
	p.major = version / 10000
	if check != nil {
		var notPreferred *pgconn.NotPreferredError
		switch err := check(ctx, conn.PgConn()); {
		case err == nil:
		case errors.As(err, &notPreferred):
			p.rank = rankFallback
		default:
			p.rank = rankRefused
		}
	}
	return p
}

// chooseServer picks the server a session decodes on, or says why there is none yet.
// A URL that follows the primary decodes on the server that takes writes. Any other
// decodes where the slot is; with no slot anywhere, on the server the URL prefers,
// but only once every server answered, since one that does not may hold the slot.
func chooseServer(probes []serverProbe, followPrimary bool, slot string) (int, string) {
	best := func(ok func(serverProbe) bool) int {
		pick := -1
		for i, p := range probes {
			if p.err == nil && ok(p) && (pick < 0 || p.rank < probes[pick].rank) {
				pick = i
			}
		}
		return pick
	}
	if followPrimary {
		// A server still in recovery may pass the check when it was promoted between
		// the probe's two questions: it is taken at the next probe, as a primary, so
		// that a session never starts out as a standby that is already promoted.
		if i := best(func(p serverProbe) bool { return p.rank == rankWanted && !p.inRecovery }); i >= 0 {
			return i, ""
		}
		return -1, "no server of --database-url takes writes now (its target_session_attrs asks for the primary): " +
			"waiting for one" + downList(probes)
	}
	if i := best(func(p serverProbe) bool { return p.hasSlot }); i >= 0 {
		return i, ""
	}
	for _, p := range probes {
		if p.err != nil {
			return -1, fmt.Sprintf("server %s of --database-url does not answer, and slot %s may be there: the relay "+
				"decodes where its slot is and creates no second one elsewhere; waiting for that server (%v)", p.server, slot, p.err)
		}
	}
	if i := best(func(p serverProbe) bool { return p.rank != rankRefused }); i >= 0 {
		return i, ""
	}
	return -1, "no server of --database-url is of the kind its target_session_attrs asks for: waiting for one"
}

// downList names the servers that did not answer, for a log line.
func downList(probes []serverProbe) string {
	var down []string
	for _, p := range probes {
		if p.err != nil {
			down = append(down, p.server.String())
		}
	}
	if len(down) == 0 {
		return ""
	}
	return " (not answering: " + strings.Join(down, ", ") + ")"
}

// decodingServer decides, before a session, which of --database-url's servers it
// decodes on (chooseServer), and points every connection of the session there: the
// leadership lock, the slot's and the replication connection. Until one is found it
// waits, asking again every pairProbeInterval, and says why in a log line, in
// /readyz and so in walrelay status. A URL with one server needs none of this.
func (r *Relay) decodingServer(ctx context.Context) error {
	if len(r.servers) < 2 {
		return nil
	}
	said := ""
	defer r.waiting.Store(nil)
	for {
		probes := make([]serverProbe, len(r.servers))
		for i, s := range r.servers {
			probes[i] = probeServer(ctx, r.cfg, r.urlCheck, s)
		}
		if ctx.Err() != nil {
			return nil
		}
		i, why := chooseServer(probes, r.followPrimary, r.cfg.Slot)
		if i >= 0 {
			return r.decodeOn(probes, i)
		}
		if why != said {
			r.log.Warn("waiting: "+why, "slot", r.cfg.Slot)
			said = why
		}
		reason := "waiting: " + why
		r.waiting.Store(&reason)
		if !backoff.Sleep(ctx, pairProbeInterval) {
			return nil
		}
	}
}

// decodeOn makes probes[i] the session's server.
func (r *Relay) decodeOn(probes []serverProbe, i int) error {
	p := probes[i]
	for j, o := range probes {
		if j != i && o.hasSlot {
			r.log.Error("a second slot of the relay's name is on a server of --database-url where the relay does not "+
				"decode: it keeps WAL there (and, on a standby with hot_standby_feedback, holds back the primary's vacuum); "+
				"drop it on that server: SELECT pg_drop_replication_slot('"+r.cfg.Slot+"')",
				"slot", r.cfg.Slot, "server", o.server.String(), "decoding_on", p.server.String())
		}
	}
	if p.inRecovery && p.major < StandbyDecodingMajor {
		return &catalog.SetupError{Msg: fmt.Sprintf("server %s of --database-url is a hot standby on PostgreSQL %d, "+
			"which cannot decode during recovery (logical decoding on a standby needs PostgreSQL %d or later): ask for "+
			"the primary (target_session_attrs=read-write), or upgrade the standby", p.server, p.major, StandbyDecodingMajor)}
	}
	if p.inRecovery && !p.feedback && !r.feedbackWarned {
		r.feedbackWarned = true
		r.log.Warn("hot_standby_feedback is off on the standby: the primary's vacuum may remove catalog rows the slot " +
			"still needs, which invalidates it (the relay then creates it again with a catch-up pass: duplicates); " +
			"set hot_standby_feedback = on on the standby, with primary_slot_name")
	}
	target := pinURL(r.cfg.DatabaseURL, p.server)
	if target == r.target && r.onStandby && !p.inRecovery {
		// The replication session before this one decoded there as a standby: as checkStillStandby.
		return r.promotedError()
	}
	if target != r.target || p.inRecovery != r.onStandby {
		role := "the primary"
		if p.inRecovery {
			role = "a hot standby"
		}
		r.log.Info("decoding on "+role+" of --database-url: the slot, the leadership lock and the replication "+
			"connection are all there", "slot", r.cfg.Slot, "server", p.server.String(), "slot_exists", p.hasSlot)
	}
	r.target, r.onStandby = target, p.inRecovery
	return nil
}

// SlotServer is, for the commands beside the relay (package ops), the URL of the server of a
// --database-url naming several that a relay decodes on (chooseServer), so that the
// slot is read where it is; with none yet, --database-url and why there is none.
func SlotServer(ctx context.Context, cfg Config) (string, string) {
	servers := urlServers(cfg.DatabaseURL)
	if len(servers) < 2 || followsPrimary(cfg.DatabaseURL) {
		return cfg.DatabaseURL, ""
	}
	var check pgconn.ValidateConnectFunc
	if c, err := pgconn.ParseConfig(cfg.DatabaseURL); err == nil {
		check = c.ValidateConnect
	}
	probes := make([]serverProbe, len(servers))
	for i, s := range servers {
		probes[i] = probeServer(ctx, cfg, check, s)
	}
	i, why := chooseServer(probes, false, cfg.Slot)
	if i < 0 {
		return cfg.DatabaseURL, why
	}
	return pinURL(cfg.DatabaseURL, probes[i].server), ""
}

// setUpPair prepares a relay whose --database-url names several servers: the
// bookkeeping goes to --primary-url, or else to the URL's read-write server, and
// each session finds its server with decodingServer.
func (r *Relay) setUpPair() {
	r.servers = urlServers(r.cfg.DatabaseURL)
	r.followPrimary = followsPrimary(r.cfg.DatabaseURL)
	if cfg, err := pgconn.ParseConfig(r.cfg.DatabaseURL); err == nil {
		r.urlCheck = cfg.ValidateConnect
	}
	primaryHost := databaseHost(r.cfg.PrimaryURL)
	if r.cfg.PrimaryURL == "" {
		r.cfg.PrimaryURL = dbconn.PrimaryOfHosts(r.cfg.DatabaseURL)
		primaryHost = "the read-write server of --database-url"
	}
	names := make([]string, len(r.servers))
	for i, s := range r.servers {
		names[i] = s.String()
	}
	how := "where the slot is"
	if r.followPrimary {
		how = "on the server that takes writes"
	}
	r.log.Info("--database-url names several servers: each session decodes "+how+", the bookkeeping goes to the primary",
		"servers", names, "primary", primaryHost)
}
