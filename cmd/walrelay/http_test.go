package main_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// httpReceiver is a webhook receiver in the test process, reached by the relay
// binary over loopback. It verifies every request with the Standard Webhooks
// library, records each event id's arrivals and each aggregate's first ones in
// arrival order, and answers with answer (200 when it returns 0).
type httpReceiver struct {
	srv    *httptest.Server
	wh     *standardwebhooks.Webhook
	answer func(id string) (int, string)
	auths  sync.Map // the Authorization values seen
	mu     struct {
		sync.Mutex
		count  map[string]int
		firsts map[string][]string
		bad    []string
	}
}

// httpSecret is the relay's signing secret in these tests.
var httpSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("a test secret of 32 bytes, fixed"))

func newHTTPReceiver(t *testing.T, answer func(id string) (int, string)) *httpReceiver {
	t.Helper()
	r := &httpReceiver{answer: answer}
	r.mu.count, r.mu.firsts = map[string]int{}, map[string][]string{}
	wh, err := standardwebhooks.NewWebhook(httpSecret)
	if err != nil {
		t.Fatal(err)
	}
	r.wh = wh
	r.srv = httptest.NewServer(r)
	t.Cleanup(r.srv.Close)
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for i, b := range r.mu.bad {
			if i < 10 {
				t.Errorf("request: %s", b)
			}
		}
	})
	return r
}

func (r *httpReceiver) ServeHTTP(w nethttp.ResponseWriter, req *nethttp.Request) {
	body, err := io.ReadAll(req.Body)
	id := req.Header.Get("Webhook-Id")
	r.auths.Store(req.Header.Get("Authorization"), true)
	r.mu.Lock()
	switch {
	case err != nil:
		r.mu.Unlock()
		w.WriteHeader(nethttp.StatusBadRequest)
		return
	case r.wh.Verify(body, req.Header) != nil || id != req.Header.Get("Id"):
		r.mu.bad = append(r.mu.bad, fmt.Sprintf("event %s: signature or id does not verify", id))
	}
	if r.mu.count[id]++; r.mu.count[id] == 1 {
		agg := req.Header.Get("Aggregate-Id")
		r.mu.firsts[agg] = append(r.mu.firsts[agg], id)
	}
	r.mu.Unlock()
	if r.answer != nil {
		if code, body := r.answer(id); code != 0 {
			w.WriteHeader(code)
			_, _ = io.WriteString(w, body)
			return
		}
	}
	w.WriteHeader(nethttp.StatusOK)
}

func (r *httpReceiver) delivered() (count map[string]int, firsts map[string][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	count, firsts = map[string]int{}, map[string][]string{}
	for k, v := range r.mu.count {
		count[k] = v
	}
	for k, v := range r.mu.firsts {
		firsts[k] = slices.Clone(v)
	}
	return count, firsts
}

func httpEnv(dbURL, slot, url string, extra ...string) []string {
	return baseEnv(append([]string{"WALRELAY_DATABASE_URL=" + dbURL, "WALRELAY_METRICS_ADDR=", "WALRELAY_LOG_FORMAT=text",
		"WALRELAY_SLOT=" + slot, "WALRELAY_STATUS_INTERVAL=100ms", "WALRELAY_SINK=http", "WALRELAY_HTTP_URL=" + url,
		"WALRELAY_HTTP_SIGNING_SECRETS=env:WALRELAY_TEST_WEBHOOK_SECRET", "WALRELAY_TEST_WEBHOOK_SECRET=" + httpSecret}, extra...)...)
}

// 6,000 events through three SIGKILLs of the relay binary POSTing to a receiver:
// every committed event, row or table-less, arrives signed, the first arrivals of
// each aggregate are in commit order, and the repeats the kills cause are counted.
func TestHTTPCrashLosesNothing(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	rcv := newHTTPReceiver(t, nil)
	slot := slotName(t, "")
	env := httpEnv(dbURL, slot, rcv.srv.URL+"/hooks/{aggregate_type}")

	crashLosesNothing(t, "http", dbURL, slot, env, 6000, rcv.delivered)
}

// An event the receiver refuses (422) is handed to the poller and, after
// --max-attempts, a dead letter with the status and the body's first bytes; the
// later events of its aggregate arrive, in order, and another aggregate is not held.
func TestHTTPDeadLetterRefused(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	bad := outbox.Event{AggregateType: "order", AggregateID: "big", EventType: "order.bad", Payload: []byte(`{"amount": -1}`)}
	rcv := newHTTPReceiver(t, func(id string) (int, string) {
		if id == bad.ID {
			return nethttp.StatusUnprocessableEntity, `{"error":"amount must be positive"}`
		}
		return 0, ""
	})
	slot := slotName(t, "")
	conn := testenv.Connect(t, dbURL)
	ctx := context.Background()
	// The id is known before the relay starts, so that the receiver can refuse it.
	if err := conn.QueryRow(ctx, "SELECT gen_random_uuid()::text").Scan(&bad.ID); err != nil {
		t.Fatal(err)
	}
	env := httpEnv(dbURL, slot, rcv.srv.URL+"/hooks?type={event_type}", "WALRELAY_MAX_ATTEMPTS=2", "WALRELAY_RETRY_BACKOFF_MIN=100ms",
		"WALRELAY_RETRY_BACKOFF_MAX=200ms", "WALRELAY_POLL_INTERVAL=200ms")
	relay := startProc(t, "relay", env, "run")
	waitStreaming(t, conn, slot, relay)

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	events := []*outbox.Event{&bad}
	for i := range 3 {
		events = append(events, &outbox.Event{AggregateType: "order", AggregateID: "big", EventType: "order.after", Payload: fmt.Appendf(nil, `{"n": %d}`, i)})
	}
	other := outbox.Event{AggregateType: "order", AggregateID: "other", EventType: "order.other", Payload: []byte(`{}`)}
	events = append(events, &other)
	for _, e := range events {
		if err := outbox.Write(ctx, tx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var reason string
	var attempts int
	testenv.WaitFor(t, time.Minute, "the refused event in outbox_events_dead_letters", func() bool {
		err := conn.QueryRow(ctx, "SELECT attempts, last_error FROM outbox_events_dead_letters WHERE id = $1", bad.ID).Scan(&attempts, &reason)
		return err == nil
	})
	if attempts != 2 || !strings.Contains(reason, "422") || !strings.Contains(reason, "amount must be positive") {
		t.Errorf("dead letter after %d attempts, reason %q; want 2 attempts, the status and the body", attempts, reason)
	}
	testenv.WaitFor(t, 30*time.Second, "the other events received", func() bool { c, _ := rcv.delivered(); return len(c) == 5 })
	relay.stop(15 * time.Second)
	count, firsts := rcv.delivered()
	if want := []string{bad.ID, events[1].ID, events[2].ID, events[3].ID}; !slices.Equal(firsts["big"], want) {
		t.Errorf("aggregate big arrived as %v, want %v", firsts["big"], want)
	}
	for _, e := range events[1:] {
		if count[e.ID] != 1 {
			t.Errorf("event %s received %d times, want once", e.ID, count[e.ID])
		}
	}
}

// A receiver that refuses the credentials (401) turns every health signal, as a
// broker outage does, and hands nothing over: no dead letter, and once it takes
// them every event arrives. The Authorization value, read from the environment,
// shows in no log line and not on /readyz.
func TestHTTPUnusableEndpointHoldsAndTurnsHealth(t *testing.T) {
	t.Parallel()
	const token = "Bearer s3cretT0kenOfTheReceiver"
	var refusing sync.Mutex
	refuse := true
	rcv := newHTTPReceiver(t, func(id string) (int, string) {
		refusing.Lock()
		defer refusing.Unlock()
		if refuse {
			return nethttp.StatusUnauthorized, "unknown token"
		}
		return 0, ""
	})
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	slot, admin := slotName(t, ""), testenv.FreeAddr(t)
	env := httpEnv(dbURL, slot, rcv.srv.URL+"/hooks", "WALRELAY_METRICS_ADDR="+admin, "WALRELAY_ACK_TIMEOUT=1s",
		"WALRELAY_HTTP_HEADERS=Authorization=env:WALRELAY_TEST_RECEIVER_TOKEN", "WALRELAY_TEST_RECEIVER_TOKEN="+token,
		"WALRELAY_POLL_INTERVAL=200ms", "WALRELAY_MAX_ATTEMPTS=2")
	relay := startProc(t, "relay", env, "run")
	waitStreaming(t, conn, slot, relay)
	testenv.WriteTx(t, conn, []string{"held"}, "e", 3, false)
	var readyz string
	if !poll(30*time.Second, func() bool {
		code, body := httpGetCode(t, "http://"+admin+"/readyz")
		readyz = body
		return code == nethttp.StatusServiceUnavailable && strings.Contains(body, "broker not acknowledging")
	}) {
		t.Fatalf("/readyz does not say the endpoint is not acknowledging: %s", readyz)
	}
	if !poll(30*time.Second, func() bool { return strings.Contains(relay.output.String(), "refuses every event") }) {
		t.Fatalf("no WARN line about the refusing endpoint:\n%s", relay.output.String())
	}
	refusing.Lock()
	refuse = false
	refusing.Unlock()
	testenv.WaitFor(t, time.Minute, "3 events received once the endpoint takes them", func() bool {
		c, _ := rcv.delivered()
		return len(c) == 3
	})
	testenv.WaitFor(t, 30*time.Second, "/readyz 200 again", func() bool {
		code, _ := httpGetCode(t, "http://"+admin+"/readyz")
		return code == nethttp.StatusOK
	})
	var dead int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM outbox_events_dead_letters").Scan(&dead); err != nil {
		t.Fatal(err)
	}
	relay.stop(15 * time.Second)
	if dead != 0 {
		t.Errorf("%d dead letters: refused credentials are the endpoint's, not the events'", dead)
	}
	if _, ok := rcv.auths.Load(token); !ok {
		t.Errorf("no request carried the Authorization header from the environment")
	}
	for where, text := range map[string]string{"the relay's output": relay.output.String(), "/readyz": readyz} {
		if strings.Contains(text, "s3cretT0ken") {
			t.Errorf("%s shows the Authorization value: %s", where, text)
		}
	}
}
