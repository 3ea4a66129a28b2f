package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/walrelay/walrelay/ops"
	"github.com/walrelay/walrelay/relay"
)

// The admin API shares the metrics listener: GET /status, GET and POST /pause,
// POST /resume, GET /dlq, GET /dlq/ID/record, POST /dlq/retry, POST /dlq/purge,
// POST and GET /replay, GET /replay/ID and GET /overview (the console's, console.go). On a loopback address it is open unless a token is
// set; on any other address it needs AdminToken, and without one it is off (403)
// rather than open to the network (docs/operations.md). Web pages are kept out by
// adminGuard (guard.go).

// adminStatusLimits are GET /status's bounds when the request names none: those of
// `walrelay status`.
var adminStatusLimits = ops.StatusLimits{MaxPendingAge: 30 * time.Second}

// dlqPageLimit is GET /dlq's page size when the request names none, and its largest.
const (
	dlqPageLimit    = 100
	dlqPageLimitMax = 1000
)

// relayAPI is the admin API of one relay: the relay, and the replays started
// through it.
type relayAPI struct {
	name    string // the database's name in a group; "" for a relay of its own
	r       *relay.Relay
	replays replayJobs
}

// adminRoutes are the admin API's patterns, each with the handler that answers it
// for one relay.
func adminRoutes(ctx context.Context) map[string]func(*relayAPI) http.Handler {
	return map[string]func(*relayAPI) http.Handler{
		"GET /status": func(a *relayAPI) http.Handler { return http.HandlerFunc(a.serveStatus) },
		"GET /pause": func(a *relayAPI) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				writeJSON(w, http.StatusOK, pauseNow(a.r))
			})
		},
		"POST /pause": func(a *relayAPI) http.Handler { return http.HandlerFunc(a.servePause) },
		"POST /resume": func(a *relayAPI) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				writeJSON(w, http.StatusOK, pauseAnswer{Paused: false, Changed: a.r.Resume()})
			})
		},
		"GET /dlq":             func(a *relayAPI) http.Handler { return http.HandlerFunc(a.serveDeadLetters) },
		"GET /dlq/{id}/record": func(a *relayAPI) http.Handler { return http.HandlerFunc(a.servePreview) },
		"POST /dlq/retry":      func(a *relayAPI) http.Handler { return http.HandlerFunc(a.serveRetry) },
		"POST /dlq/purge":      func(a *relayAPI) http.Handler { return http.HandlerFunc(a.servePurge) },
		"POST /replay":         func(a *relayAPI) http.Handler { return a.serveReplay(ctx) },
		"GET /replay":          func(a *relayAPI) http.Handler { return http.HandlerFunc(a.serveReplays) },
		"GET /replay/{id}":     func(a *relayAPI) http.Handler { return http.HandlerFunc(a.serveReplayProgress) },
		"GET /overview":        func(a *relayAPI) http.Handler { return http.HandlerFunc(a.serveOverview) },
	}
}

// adminHandlers registers the admin API on mux, behind guard, for the relays by
// name: a request names its database with ?database=NAME, which it may leave out
// when there is one (pickDatabase). Every action is logged (actions.go); GET
// /databases names the databases, for the console.
func adminHandlers(ctx context.Context, mux *http.ServeMux, guard func(http.Handler) http.Handler, relays []relay.Member,
	log *slog.Logger, proxies trustedProxies) {
	apis := make(map[string]*relayAPI, len(relays))
	for _, m := range relays {
		apis[m.Name] = &relayAPI{name: m.Name, r: m.Relay}
	}
	for pattern, route := range adminRoutes(ctx) {
		byName := make(map[string]http.Handler, len(relays))
		for name, a := range apis {
			byName[name] = logged(log, proxies, name, route(a))
		}
		mux.Handle(pattern, guard(pickDatabase(byName)))
	}
	names := memberNames(relays)
	slices.Sort(names)
	mux.Handle("GET /databases", guard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string][]string{"databases": names})
	})))
}

// pickDatabase passes a request on to the handler of the database its ?database=
// names; with one database the parameter may be left out.
func pickDatabase(byName map[string]http.Handler) http.Handler {
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	slices.Sort(names)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		name := req.URL.Query().Get("database")
		if len(byName) == 1 && (name == "" || names[0] == "") { // a relay of its own answers whatever is asked
			name = names[0]
		}
		h, ok := byName[name]
		switch {
		case ok:
			h.ServeHTTP(w, req)
		case name == "":
			writeJSON(w, http.StatusBadRequest, adminError{"this relay runs several databases; name one with ?database=NAME (walrelay pause and resume: --database NAME): " +
				strings.Join(names, ", ")})
		default:
			writeJSON(w, http.StatusNotFound, adminError{"no database " + strconv.Quote(name) + " here; the relay runs " +
				strings.Join(names, ", ")})
		}
	})
}

// pauseAnswer is what POST /pause and /resume answer: the state now, and whether
// the request changed it.
type pauseAnswer struct {
	Paused  bool `json:"paused"`
	Changed bool `json:"changed"`
}

// pauseState is GET /pause's answer: whether the relay is paused, and since when
// and why when it is.
type pauseState struct {
	Paused bool       `json:"paused"`
	Since  *time.Time `json:"since,omitempty"`
	Reason string     `json:"reason,omitempty"`
}

// pauseNow is r's pause state, as GET /pause answers it.
func pauseNow(r *relay.Relay) pauseState {
	ps := r.PauseState()
	st := pauseState{Paused: ps.Paused, Reason: ps.Reason}
	if !ps.Since.IsZero() {
		since := ps.Since
		st.Since = &since
	}
	return st
}

// adminError is the body of every admin API error.
type adminError struct {
	Error string `json:"error"`
}

// serveStatus answers what `walrelay status --json` prints, with the relay's own
// readiness in place of asking it over HTTP. max_pending_age and max_dead_letters
// set the bounds as status's flags do.
func (a *relayAPI) serveStatus(w http.ResponseWriter, req *http.Request) {
	limits := adminStatusLimits
	q := req.URL.Query()
	if v := q.Get("max_pending_age"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			writeJSON(w, http.StatusBadRequest, adminError{"max_pending_age: want a duration like 30s, got " + strconv.Quote(v)})
			return
		}
		limits.MaxPendingAge = d
	}
	if v := q.Get("max_dead_letters"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeJSON(w, http.StatusBadRequest, adminError{"max_dead_letters: want a whole number >= 0, got " + strconv.Quote(v)})
			return
		}
		limits.MaxDeadLetters = n
	}
	cfg := a.r.Config()
	st, err := ops.ReadStatus(req.Context(), cfg, limits)
	if err != nil {
		st = &ops.Status{Slot: cfg.Slot, Publication: cfg.Publication,
			Problems: []ops.Problem{{Check: ops.CheckDatabase, Message: err.Error()}}}
	}
	st.Relay = health(a.r)
	st.Relay.State = relayState(a.r)
	if ps := a.r.PauseState(); ps.Paused {
		st.Relay.Paused, st.Relay.PauseReason = true, ps.Reason
		if !ps.Since.IsZero() {
			st.Relay.PausedSince = &ps.Since
		}
	}
	st.Sink, st.Build = sinkStatus(a.r), buildStatus()
	if !st.Relay.Ready {
		st.Problems = append(st.Problems, ops.Problem{Check: ops.CheckRelayNotReady,
			Message: fmt.Sprintf("the relay is not ready: %s", st.Relay.Answer)})
	}
	writeJSON(w, http.StatusOK, ops.NewStatusReport(st))
}

// health is what the relay says of itself: /readyz?streaming's answer and when it last
// confirmed events.
func health(r *relay.Relay) *ops.RelayHealth {
	ready, why := r.Ready()
	h := &ops.RelayHealth{URL: "self", Reachable: true, Ready: ready, Answer: why}
	if at := r.EventsConfirmedAt(); at != nil {
		h.EventsConfirmedAt = at
	}
	return h
}

// deadLetterPage is GET /dlq's answer.
type deadLetterPage struct {
	DeadLetters []ops.TableDeadLetter `json:"dead_letters"`
	Offset      int                   `json:"offset"`
	Limit       int                   `json:"limit"`
	// NextOffset is the offset of the next page; absent on the last.
	NextOffset *int `json:"next_offset,omitempty"`
}

// serveDeadLetters lists dead letters with their last error, oldest first, a page
// at a time: ?offset=N&limit=M (limit 100 by default, at most 1000).
func (a *relayAPI) serveDeadLetters(w http.ResponseWriter, req *http.Request) {
	dl, ok := deadLetters(w, a.r)
	if !ok {
		return
	}
	q := req.URL.Query()
	offset, ok := queryInt(w, q.Get("offset"), "offset", 0, 0, -1)
	if !ok {
		return
	}
	limit, ok := queryInt(w, q.Get("limit"), "limit", dlqPageLimit, 1, dlqPageLimitMax)
	if !ok {
		return
	}
	letters, more, err := dl.List(req.Context(), offset, limit)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, adminError{err.Error()})
		return
	}
	page := deadLetterPage{DeadLetters: letters, Offset: offset, Limit: limit}
	if more {
		next := offset + len(letters)
		page.NextOffset = &next
	}
	writeJSON(w, http.StatusOK, page)
}

// retryRequest is POST /dlq/retry's body: ids, or all.
type retryRequest struct {
	IDs []string `json:"ids"`
	All bool     `json:"all"`
}

// serveRetry gives dead letters a fresh set of attempts, as `walrelay dlq retry` does.
func (a *relayAPI) serveRetry(w http.ResponseWriter, req *http.Request) {
	dl, ok := deadLetters(w, a.r)
	if !ok {
		return
	}
	var body retryRequest
	if !decodeBody(w, req, 1<<20, &body, false, `want a JSON body {"ids": ["..."]} or {"all": true}`) {
		return
	}
	if (len(body.IDs) == 0) == !body.All {
		writeJSON(w, http.StatusBadRequest, adminError{`give either "ids" (one or more) or "all": true`})
		return
	}
	n, err := dl.Retry(req.Context(), body.IDs, body.All)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, adminError{err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"reset": n})
}

// deadLetters are r's dead letters, once it has checked its outbox tables; before
// that it answers 503 itself and reports false.
func deadLetters(w http.ResponseWriter, r *relay.Relay) (*ops.DeadLetters, bool) {
	stores := r.Stores()
	if stores == nil {
		writeJSON(w, http.StatusServiceUnavailable, adminError{"the relay has not checked its outbox tables yet; ask again shortly"})
		return nil, false
	}
	return ops.DeadLettersOf(stores), true
}

// decodeBody reads a JSON request body of at most limit bytes into v, refusing
// unknown fields; on a bad one it answers 400 itself, with want (the body's
// expected shape) and the reason. An empty body is allowed only when emptyOK.
func decodeBody(w http.ResponseWriter, req *http.Request, limit int64, v any, emptyOK bool, want string) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !(emptyOK && errors.Is(err, io.EOF)) {
		writeJSON(w, http.StatusBadRequest, adminError{want + ": " + err.Error()})
		return false
	}
	return true
}

// queryInt parses a query parameter within [lo, hi] (hi < 0: no upper bound),
// answering 400 itself when it is not.
func queryInt(w http.ResponseWriter, v, name string, def, lo, hi int) (int, bool) {
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < lo || hi >= 0 && n > hi {
		bound := ""
		if hi >= 0 {
			bound = " and <= " + strconv.Itoa(hi)
		}
		writeJSON(w, http.StatusBadRequest, adminError{name + ": want a whole number >= " + strconv.Itoa(lo) + bound + ", got " + strconv.Quote(v)})
		return 0, false
	}
	return n, true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // an error's advice shows <placeholders> as written
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
