package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/ops"
)

// adminCall sends method to url with token (none when empty) and body (JSON), and
// returns the status code and the body.
func adminCall(t *testing.T, method, url, token, body string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewBufferString(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// With a token set, every admin endpoint answers 401 to a request without it or
// with another, and serves one that carries it: status as `walrelay status --json`
// prints it, pause and resume, dead letters with their last error, and their retry.
// /metrics and /readyz stay open, as before.
func TestAdminAPIAuthAndEndpoints(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	const token = "s3cret-admin-token"
	addr := freeAddr(t)
	start(t, dbURL, broker, "admin", func(c *config) {
		c.Registry, c.MetricsAddr, c.AdminToken = prometheus.NewRegistry(), addr, token
	})
	base := "http://" + addr
	waitHTTP(t, base+"/readyz", http.StatusOK, "streaming")
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	evs := testenv.WriteTx(t, conn, []string{"adm-1", "adm-2", "adm-3"}, "order.created", 3, false)
	if !consumer.WaitDistinct(time.Minute, len(evs)) {
		t.Fatalf("delivered %d of %d", consumer.Distinct(), len(evs))
	}
	// Two of them dead-lettered, as the poller leaves a row that ran out of attempts.
	if _, err := conn.Exec(context.Background(), `UPDATE outbox_events SET attempts = 5, last_error = 'broker said no',
		dead_lettered_at = now() WHERE id = ANY($1)`, []string{evs[0].ID, evs[1].ID}); err != nil {
		t.Fatal(err)
	}

	for _, ep := range []struct{ method, path, body string }{
		{"GET", "/status", ""}, {"POST", "/pause", ""}, {"POST", "/resume", ""},
		{"GET", "/dlq", ""}, {"POST", "/dlq/retry", `{"all": true}`},
		{"POST", "/replay", `{"dry_run": true}`}, {"GET", "/replay/any", ""},
	} {
		for _, tok := range []string{"", "wrong-token"} {
			if code, body := adminCall(t, ep.method, base+ep.path, tok, ep.body); code != http.StatusUnauthorized {
				t.Errorf("%s %s with token %q: %d %s, want 401", ep.method, ep.path, tok, code, body)
			}
		}
	}
	if code, _ := adminCall(t, "GET", base+"/metrics", "", ""); code != http.StatusOK {
		t.Errorf("GET /metrics without a token: %d, want 200", code)
	}

	code, body := adminCall(t, "GET", base+"/status?max_dead_letters=5", token, "")
	var st struct {
		Slot        string `json:"slot"`
		SlotActive  bool   `json:"slot_active"`
		DeadLetters int64  `json:"dead_letters"`
		OK          bool   `json:"ok"`
		ExitCode    int    `json:"exit_code"`
		Relay       struct {
			Ready  bool   `json:"ready"`
			Answer string `json:"answer"`
		} `json:"relay"`
	}
	if err := json.Unmarshal(body, &st); code != http.StatusOK || err != nil {
		t.Fatalf("GET /status: %d %s (%v)", code, body, err)
	}
	if st.Slot != "admin" || !st.SlotActive || st.DeadLetters != 2 || !st.Relay.Ready || !st.OK || st.ExitCode != 0 {
		t.Errorf("GET /status = %s; want slot admin active, 2 dead letters, the relay ready, ok, exit code 0", body)
	}

	code, body = adminCall(t, "POST", base+"/pause", token, "")
	if code != http.StatusOK || !bytes.Contains(body, []byte(`"changed": true`)) {
		t.Fatalf("POST /pause: %d %s", code, body)
	}
	waitHTTP(t, base+"/readyz", http.StatusServiceUnavailable, "paused")
	code, body = adminCall(t, "GET", base+"/status", token, "")
	if err := json.Unmarshal(body, &st); err != nil || st.Relay.Ready || st.ExitCode != 6 {
		t.Errorf("GET /status while paused: %d %s; want the relay not ready, exit code 6", code, body)
	}
	code, body = adminCall(t, "POST", base+"/resume", token, "")
	if code != http.StatusOK || !bytes.Contains(body, []byte(`"changed": true`)) {
		t.Fatalf("POST /resume: %d %s", code, body)
	}
	waitHTTP(t, base+"/readyz", http.StatusOK, "streaming")

	type page struct {
		DeadLetters []struct {
			ID        string `json:"id"`
			LastError string `json:"last_error"`
			Attempts  int    `json:"attempts"`
		} `json:"dead_letters"`
		NextOffset *int `json:"next_offset"`
	}
	var p1, p2 page
	code, body = adminCall(t, "GET", base+"/dlq?limit=1", token, "")
	if err := json.Unmarshal(body, &p1); code != http.StatusOK || err != nil {
		t.Fatalf("GET /dlq: %d %s (%v)", code, body, err)
	}
	if len(p1.DeadLetters) != 1 || p1.DeadLetters[0].ID != evs[0].ID || p1.DeadLetters[0].LastError != "broker said no" ||
		p1.DeadLetters[0].Attempts != 5 || p1.NextOffset == nil || *p1.NextOffset != 1 {
		t.Fatalf("GET /dlq?limit=1 = %s; want %s with its last error, and a next page at 1", body, evs[0].ID)
	}
	code, body = adminCall(t, "GET", base+"/dlq?limit=1&offset=1", token, "")
	if err := json.Unmarshal(body, &p2); code != http.StatusOK || err != nil {
		t.Fatalf("GET /dlq page 2: %d %s (%v)", code, body, err)
	}
	if len(p2.DeadLetters) != 1 || p2.DeadLetters[0].ID != evs[1].ID || p2.NextOffset != nil {
		t.Fatalf("GET /dlq?limit=1&offset=1 = %s; want %s and no next page", body, evs[1].ID)
	}
	if code, body := adminCall(t, "GET", base+"/dlq?limit=0", token, ""); code != http.StatusBadRequest {
		t.Errorf("GET /dlq?limit=0: %d %s, want 400", code, body)
	}
	if code, body := adminCall(t, "POST", base+"/dlq/retry", token, `{}`); code != http.StatusBadRequest {
		t.Errorf("POST /dlq/retry without ids or all: %d %s, want 400", code, body)
	}
	code, body = adminCall(t, "POST", base+"/dlq/retry", token, `{"ids": ["`+evs[0].ID+`"]}`)
	if code != http.StatusOK || !bytes.Contains(body, []byte(`"reset": 1`)) {
		t.Fatalf("POST /dlq/retry: %d %s, want one reset", code, body)
	}
	// The poller publishes the retried row again.
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(evs[0].ID) == 2 }) {
		t.Fatalf("the retried dead letter was not published again (seen %d times)", consumer.Count(evs[0].ID))
	}
	code, body = adminCall(t, "GET", base+"/dlq", token, "")
	if err := json.Unmarshal(body, &p1); err != nil || len(p1.DeadLetters) != 1 || p1.DeadLetters[0].ID != evs[1].ID {
		t.Fatalf("GET /dlq after the retry: %d %s; want only %s", code, body, evs[1].ID)
	}

	// A replay through the API: a job id, whose progress ends done with every event
	// sent, and records that carry its replay header.
	if code, body := adminCall(t, "POST", base+"/replay", token, `{"since": "not a time"}`); code != http.StatusBadRequest {
		t.Errorf("POST /replay with a bad since: %d %s, want 400", code, body)
	}
	code, body = adminCall(t, "POST", base+"/replay", token, `{"event_type": "order.created", "since": "1h", "rate": 1000}`)
	var job struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &job); code != http.StatusAccepted || err != nil || job.ID == "" {
		t.Fatalf("POST /replay: %d %s (%v), want 202 with an id", code, body, err)
	}
	var pr struct {
		Total, Sent int64
		Done        bool
		Error       string
	}
	waitFor(t, 30*time.Second, "the replay to finish", func() bool {
		code, body = adminCall(t, "GET", base+"/replay/"+job.ID, token, "")
		return code == http.StatusOK && json.Unmarshal(body, &pr) == nil && pr.Done
	})
	if pr.Total != 3 || pr.Sent != 3 || pr.Error != "" {
		t.Fatalf("GET /replay/%s = %s; want 3 of 3 sent, no error", job.ID, body)
	}
	replayed := func() int {
		n := 0
		for _, rec := range consumer.Records {
			if testenv.Header(rec, ops.ReplayHeader) == job.ID {
				n++
			}
		}
		return n
	}
	if !consumer.WaitFor(time.Minute, func() bool { return replayed() == 3 }) {
		t.Fatalf("consumed %d records of replay %s, want 3", replayed(), job.ID)
	}
	if code, _ := adminCall(t, "GET", base+"/replay/unknown", token, ""); code != http.StatusNotFound {
		t.Errorf("GET /replay/unknown: %d, want 404", code)
	}
}

// On an address other than loopback, a relay without a token keeps the admin API
// and the profiler off: 403, with the setting to use, and a warning at the start;
// /readyz stays open.
func TestAdminAPIOffOnNetworkWithoutToken(t *testing.T) {
	t.Parallel()
	dbURL, broker, _ := outboxWithBroker(t)
	_, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	rn := start(t, dbURL, broker, "adminoff", func(c *config) {
		c.Registry, c.MetricsAddr, c.Pprof = prometheus.NewRegistry(), net.JoinHostPort("0.0.0.0", port), true
	})
	base := "http://" + net.JoinHostPort("127.0.0.1", port)
	waitHTTP(t, base+"/readyz", http.StatusOK, "streaming")
	for _, ep := range []struct{ method, path string }{{"GET", "/status"}, {"POST", "/pause"}, {"GET", "/dlq"}, {"POST", "/replay"}, {"GET", "/debug/pprof/"},
		{"GET", "/debug/pprof/goroutine?debug=1"}, {"GET", "/ui/"}, {"GET", "/ui/console.js"}, {"GET", "/overview"}, {"POST", "/dlq/purge"},
		{"GET", "/replay"}, {"GET", "/databases"}} {
		code, body := adminCall(t, ep.method, base+ep.path, "", "")
		if code != http.StatusForbidden || !bytes.Contains(body, []byte("--admin-token")) {
			t.Errorf("%s %s: %d %s, want 403 naming --admin-token", ep.method, ep.path, code, body)
		}
	}
	if rn.relay.Paused() {
		t.Fatal("a refused POST /pause paused the relay")
	}
	if !rn.waitLog(5*time.Second, "admin API off") {
		t.Fatal("no warning that the admin API is off")
	}
	if !strings.Contains(rn.logs.String(), "/dlq, /replay and /debug/pprof") {
		t.Errorf("the warning does not name every endpoint it turns off, /replay among them:\n%s", rn.logs.String())
	}
}
