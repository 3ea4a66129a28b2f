package ops

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/walrelay/walrelay/internal/redact"
)

// RelayHealth is what a running relay says of itself over HTTP (package admin).
type RelayHealth struct {
	URL       string `json:"url"`
	Reachable bool   `json:"reachable"`
	// Ready: /readyz answered 200. Answer is its body, the reason it gives.
	Ready  bool   `json:"ready"`
	Answer string `json:"answer,omitempty"`
	Error  string `json:"error,omitempty"` // why it could not be asked
	// EventsConfirmedAt is when its confirmed LSN last moved past a transaction with
	// events (walrelay_events_confirmed_timestamp_seconds); nil: not since it started.
	EventsConfirmedAt *time.Time `json:"events_confirmed_at,omitempty"`
	// State, Paused and below are what the admin API's /status adds of the relay it
	// answers for (package admin); a relay asked over HTTP leaves them out.
	State       RelayState `json:"state,omitempty"`
	Paused      bool       `json:"paused,omitempty"`
	PausedSince *time.Time `json:"paused_since,omitempty"`
	PauseReason string     `json:"pause_reason,omitempty"`
}

// RelayState is what a relay does now, in one word; Answer says why.
type RelayState string

const (
	StateStreaming  RelayState = "streaming"   // ready: publishing as events come
	StatePaused     RelayState = "paused"      // paused by an operator (PauseReason)
	StateStandby    RelayState = "standby"     // waiting for another instance to release the slot
	StateBrokerDown RelayState = "broker_down" // the broker does not acknowledge
	StateStalled    RelayState = "stalled"     // slot lag grows and the confirmed LSN stands still
	StateNotReady   RelayState = "not_ready"   // starting, catching up or reconnecting: Answer says which
)

// probeTimeout bounds each request to the relay.
const probeTimeout = 3 * time.Second

// probeRelay asks the relay at base (http://host:port) for /readyz?streaming and reads the
// time of its last event confirmation from /metrics; with database set, of that
// database of a relay that runs several (Group). Where the metrics name other slots
// and not slot, another relay answers there: it is reported unreachable, not taken
// for this slot's.
func probeRelay(ctx context.Context, base, slot, database string) *RelayHealth {
	base = strings.TrimSuffix(base, "/")
	h := &RelayHealth{URL: redact.URL(base)} // shown by status: --admin-url may carry a token
	// ?streaming: status reports a relay that does not move events, a standby too,
	// where the bare /readyz counts a healthy standby as ready (package admin).
	readyz := base + "/readyz?streaming"
	if database != "" {
		readyz += "&database=" + url.QueryEscape(database)
	}
	code, body, err := get(ctx, readyz)
	if err != nil {
		h.Error = redact.Text(err.Error(), base)
		return h
	}
	metrics := ""
	if c, b, err := get(ctx, base+"/metrics"); err == nil && c == http.StatusOK {
		metrics = b
	}
	slots, confirmed := scanMetrics(metrics, database)
	if len(slots) > 0 && !slots[slot] {
		h.Error = fmt.Sprintf("the relay there streams another slot (%s), not %s", strings.Join(slices.Sorted(maps.Keys(slots)), ", "), slot)
		return h
	}
	h.Reachable = true
	h.Ready = code == http.StatusOK
	h.Answer = strings.TrimSpace(body)
	if h.Answer == "" {
		h.Answer = strconv.Itoa(code) + " " + http.StatusText(code)
	}
	if confirmed > 0 {
		at := time.Unix(0, int64(confirmed*float64(time.Second))).UTC()
		h.EventsConfirmedAt = &at
	}
	return h
}

// get fetches url and returns its status code and the start of its body.
func get(ctx context.Context, url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, string(b), err
}

// scanMetrics reads, from the text exposition format, the slots of
// walrelay_slot_active and the value of walrelay_events_confirmed_timestamp_seconds:
// of the series labelled database="NAME" alone when database is set (Group).
func scanMetrics(text, database string) (slots map[string]bool, confirmed float64) {
	slotPrefix, confirmedPrefix := `walrelay_slot_active{slot="`, "walrelay_events_confirmed_timestamp_seconds "
	if database != "" {
		label := `database="` + database + `"`
		slotPrefix = `walrelay_slot_active{` + label + `,slot="`
		confirmedPrefix = "walrelay_events_confirmed_timestamp_seconds{" + label + "} "
	}
	slots = map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, slotPrefix); ok {
			if name, _, ok := strings.Cut(rest, `"`); ok {
				slots[name] = true
			}
		}
		if rest, ok := strings.CutPrefix(line, confirmedPrefix); ok {
			confirmed, _ = strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	return slots, confirmed
}
