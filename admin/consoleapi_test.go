package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/testenv"
)

// overviewAnswer is the part of GET /overview the tests read.
type overviewAnswer struct {
	State       string `json:"state"`
	Reason      string `json:"reason"`
	Paused      bool   `json:"paused"`
	PauseReason string `json:"pause_reason"`
	Latest      *struct {
		Pending     int64 `json:"pending"`
		DeadLetters int64 `json:"dead_letters"`
	} `json:"latest"`
	Samples []struct {
		At              time.Time `json:"at"`
		EventsPerSecond float64   `json:"events_per_second"`
	} `json:"samples"`
	Sink struct {
		Kind    string   `json:"kind"`
		Brokers []string `json:"brokers"`
	} `json:"sink"`
	Build struct {
		Version string `json:"version"`
	} `json:"build"`
}

// The console's API: GET /overview from the stats pass's samples (no query), a
// pause's reason in /pause, /status and /overview, the sink and build in /status,
// a dead letter's record preview, a purge that must be confirmed, the recent
// replays, and a log line per action with the address it came from.
func TestConsoleAPI(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	const token = "console-token"
	addr := freeAddr(t)
	rn := start(t, dbURL, broker, "console_api", func(c *config) {
		c.Registry, c.MetricsAddr, c.AdminToken = prometheus.NewRegistry(), addr, token
		c.StatsInterval = 100 * time.Millisecond
	})
	base := "http://" + addr
	waitHTTP(t, base+"/readyz", http.StatusOK, "streaming")
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	evs := testenv.WriteTx(t, conn, []string{"con-1", "con-2"}, "order.created", 2, false)
	if !consumer.WaitDistinct(time.Minute, len(evs)) {
		t.Fatalf("delivered %d of %d", consumer.Distinct(), len(evs))
	}
	if _, err := conn.Exec(context.Background(), `UPDATE outbox_events SET attempts = 5, last_error = 'broker said no',
		dead_lettered_at = now() WHERE id = $1`, evs[0].ID); err != nil {
		t.Fatal(err)
	}

	get := func(path string, v any) {
		t.Helper()
		code, body := adminCall(t, "GET", base+path, token, "")
		if err := json.Unmarshal(body, v); code != http.StatusOK || err != nil {
			t.Fatalf("GET %s: %d %s (%v)", path, code, body, err)
		}
	}
	var ov overviewAnswer
	waitFor(t, 30*time.Second, "a sample with the dead letter", func() bool {
		get("/overview", &ov)
		return ov.Latest != nil && ov.Latest.DeadLetters == 1
	})
	rate := 0.0
	for _, s := range ov.Samples {
		rate = max(rate, s.EventsPerSecond)
	}
	if ov.State != "streaming" || rate <= 0 || ov.Sink.Kind != "kafka" ||
		!slices.Equal(ov.Sink.Brokers, broker.ListenAddrs()) || ov.Build.Version == "" {
		t.Errorf("GET /overview = %+v; want streaming, a sample with events per second > 0, the kafka sink at %v, a version",
			ov, broker.ListenAddrs())
	}
	// ?since returns the newer samples only.
	last := ov.Samples[len(ov.Samples)-1].At
	var newer overviewAnswer
	get("/overview?since="+last.Format(time.RFC3339Nano), &newer)
	for _, s := range newer.Samples {
		if !s.At.After(last) {
			t.Errorf("GET /overview?since=%s returned a sample of %s", last, s.At)
		}
	}

	// A pause with a reason: everyone who looks sees it.
	code, body := adminCall(t, "POST", base+"/pause", token, `{"reason": "broker maintenance until 15:00"}`)
	if code != http.StatusOK {
		t.Fatalf("POST /pause with a reason: %d %s", code, body)
	}
	var st struct {
		Relay struct {
			State       string `json:"state"`
			Paused      bool   `json:"paused"`
			PauseReason string `json:"pause_reason"`
		} `json:"relay"`
		Sink struct {
			Kind    string   `json:"kind"`
			Brokers []string `json:"brokers"`
		} `json:"sink"`
		Build struct {
			Version string `json:"version"`
		} `json:"build"`
	}
	get("/status", &st)
	if st.Relay.State != "paused" || !st.Relay.Paused || st.Relay.PauseReason != "broker maintenance until 15:00" ||
		st.Sink.Kind != "kafka" || len(st.Sink.Brokers) == 0 || st.Build.Version == "" {
		t.Errorf("GET /status while paused = %+v; want state paused with the reason, the sink and the build", st)
	}
	get("/overview", &ov)
	if !ov.Paused || ov.PauseReason != "broker maintenance until 15:00" || ov.State != "paused" {
		t.Errorf("GET /overview while paused = %+v; want paused with the reason", ov)
	}
	if code, body := adminCall(t, "POST", base+"/pause", token, `{"reason": "`+strings.Repeat("x", 501)+`"}`); code != http.StatusBadRequest {
		t.Errorf("POST /pause with a 501-character reason: %d %s, want 400", code, body)
	}
	if !rn.waitLog(10*time.Second, `msg="admin action" method=POST path=/pause remote_addr=127.0.0.1 status=200`) {
		t.Errorf("no admin action logged for POST /pause with its remote address")
	}
	if code, body := adminCall(t, "POST", base+"/resume", token, ""); code != http.StatusOK {
		t.Fatalf("POST /resume: %d %s", code, body)
	}

	// The dead letter's record as the sink would publish it.
	var pv struct {
		Topic   string `json:"topic"`
		Key     struct{ Text string }
		Value   struct{ Text string }
		Headers []struct {
			Key   string
			Value struct{ Text string }
		}
	}
	get("/dlq/"+evs[0].ID+"/record", &pv)
	var idHeader string
	for _, h := range pv.Headers {
		if h.Key == "id" {
			idHeader = h.Value.Text
		}
	}
	if pv.Topic != "outbox.event."+evs[0].AggregateType || pv.Key.Text != evs[0].AggregateID || idHeader != evs[0].ID ||
		!json.Valid([]byte(pv.Value.Text)) || string(evs[0].Payload) != "" && !jsonEqual(pv.Value.Text, string(evs[0].Payload)) {
		t.Errorf("GET /dlq/%s/record = %+v; want topic outbox.event.<aggregate type>, key %s, header id %s, the payload %s",
			evs[0].ID, pv, evs[0].AggregateID, evs[0].ID, evs[0].Payload)
	}
	for _, id := range []string{evs[1].ID, "not-a-uuid"} { // published, not a dead letter; no such id
		if code, body := adminCall(t, "GET", base+"/dlq/"+id+"/record", token, ""); code != http.StatusNotFound {
			t.Errorf("GET /dlq/%s/record: %d %s, want 404", id, code, body)
		}
	}

	// A purge must say how many it deletes.
	for _, b := range []string{`{"ids": ["` + evs[0].ID + `"]}`, `{"ids": ["` + evs[0].ID + `"], "confirm": 2}`} {
		if code, body := adminCall(t, "POST", base+"/dlq/purge", token, b); code != http.StatusConflict {
			t.Errorf("POST /dlq/purge %s: %d %s, want 409", b, code, body)
		}
	}
	if code, body := adminCall(t, "POST", base+"/dlq/purge", token, `{"ids": [], "confirm": 0}`); code != http.StatusBadRequest {
		t.Errorf("POST /dlq/purge without ids: %d %s, want 400", code, body)
	}
	code, body = adminCall(t, "POST", base+"/dlq/purge", token, `{"ids": ["`+evs[0].ID+`", "`+evs[0].ID+`"], "confirm": 1}`)
	if code != http.StatusOK || !strings.Contains(string(body), `"purged": 1`) {
		t.Fatalf("POST /dlq/purge confirmed: %d %s, want 1 purged", code, body)
	}
	var rows int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM outbox_events WHERE id = $1`, evs[0].ID).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("the purged dead letter's row: %d left (%v), want 0", rows, err)
	}

	// GET /replay: the replays started here, newest first.
	var ids []string
	for range 2 {
		var job struct{ ID string }
		code, body := adminCall(t, "POST", base+"/replay", token, `{"dry_run": true, "event_type": "order.created"}`)
		if err := json.Unmarshal(body, &job); code != http.StatusAccepted || err != nil {
			t.Fatalf("POST /replay: %d %s", code, body)
		}
		ids = append(ids, job.ID)
	}
	var list struct {
		Replays []struct {
			ID     string
			Done   bool
			DryRun bool `json:"dry_run"`
			Total  int64
			Filter struct {
				EventType string `json:"event_type"`
			}
		}
	}
	waitFor(t, 30*time.Second, "both dry runs to be done", func() bool {
		get("/replay", &list)
		return len(list.Replays) == 2 && list.Replays[0].Done && list.Replays[1].Done
	})
	if list.Replays[0].ID != ids[1] || list.Replays[1].ID != ids[0] || !list.Replays[0].DryRun || list.Replays[0].Total != 1 ||
		list.Replays[0].Filter.EventType != "order.created" {
		t.Errorf("GET /replay = %+v; want %s then %s, dry runs of order.created counting the 1 row left", list.Replays, ids[1], ids[0])
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// GET /overview, which the console polls, is answered from the relay's memory:
// with PostgreSQL out of reach it still answers at once, with the samples taken
// before, where /status reports the database it cannot read.
func TestOverviewAsksNoQuery(t *testing.T) {
	t.Parallel()
	dbURL, broker, _ := outboxWithBroker(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	addr := freeAddr(t)
	start(t, u.String(), broker, "overview_memory", func(c *config) {
		c.Registry, c.MetricsAddr = prometheus.NewRegistry(), addr
		c.StatsInterval = 100 * time.Millisecond
	})
	base := "http://" + addr
	waitHTTP(t, base+"/readyz", http.StatusOK, "streaming")
	var ov overviewAnswer
	waitFor(t, 30*time.Second, "a sample", func() bool {
		code, body := adminCall(t, "GET", base+"/overview", "", "")
		return code == http.StatusOK && json.Unmarshal(body, &ov) == nil && len(ov.Samples) > 0
	})
	proxy.Down()
	for range 3 {
		began := time.Now()
		code, body := adminCall(t, "GET", base+"/overview", "", "")
		if err := json.Unmarshal(body, &ov); code != http.StatusOK || err != nil || len(ov.Samples) == 0 {
			t.Fatalf("GET /overview with the database out of reach: %d %s (%v), want 200 with the samples", code, body, err)
		}
		if took := time.Since(began); took > 2*time.Second {
			t.Fatalf("GET /overview took %s with the database out of reach: it waited for PostgreSQL", took)
		}
	}
	code, body := adminCall(t, "GET", base+"/status", "", "")
	if code != http.StatusOK || !strings.Contains(string(body), `"check": "database"`) {
		t.Errorf("GET /status with the database out of reach: %d %.300s, want the database problem", code, body)
	}
	proxy.Up()
}
