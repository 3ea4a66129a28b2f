package admin_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/ops"
)

// A paused relay publishes nothing, replays included: a replay started over the
// admin API while paused counts its rows and publishes none of them until the
// resume, with waiting "paused" in its progress; one under way when the pause comes
// stops publishing until the resume. GET /pause says since when and why.
func TestAdminReplayWhilePausedPublishesNothing(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	addr := freeAddr(t)
	start(t, dbURL, broker, "replaypaused", func(c *config) {
		c.Registry, c.MetricsAddr = prometheus.NewRegistry(), addr
	})
	base := "http://" + addr
	waitHTTP(t, base+"/readyz", http.StatusOK, "streaming")
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	evs := testenv.WriteTx(t, conn, aggregates("rp", 4), "order.replayed", 40, false)
	if !consumer.WaitDistinct(time.Minute, len(evs)) {
		t.Fatalf("delivered %d of %d before the replays", consumer.Distinct(), len(evs))
	}
	replayed := func(id string) int {
		n := 0
		for _, rec := range consumer.Records {
			if testenv.Header(rec, ops.ReplayHeader) == id {
				n++
			}
		}
		return n
	}
	var pr ops.ReplayProgress
	progress := func(id string) ops.ReplayProgress {
		t.Helper()
		code, body := adminCall(t, "GET", base+"/replay/"+id, "", "")
		pr = ops.ReplayProgress{}
		if err := json.Unmarshal(body, &pr); code != http.StatusOK || err != nil {
			t.Fatalf("GET /replay/%s: %d %s (%v)", id, code, body, err)
		}
		return pr
	}
	startReplay := func(body string) string {
		t.Helper()
		code, answer := adminCall(t, "POST", base+"/replay", "", body)
		var job struct{ ID, Waiting string }
		if err := json.Unmarshal(answer, &job); code != http.StatusAccepted || err != nil || job.ID == "" {
			t.Fatalf("POST /replay %s: %d %s (%v), want 202 with an id", body, code, answer, err)
		}
		return job.ID
	}
	pause := func(verb string) {
		t.Helper()
		if code, body := adminCall(t, "POST", base+"/"+verb, "", ""); code != http.StatusOK {
			t.Fatalf("POST /%s: %d %s", verb, code, body)
		}
	}

	// Started while paused: counted, then held.
	pause("pause")
	code, body := adminCall(t, "GET", base+"/pause", "", "")
	var st struct {
		Paused bool       `json:"paused"`
		Since  *time.Time `json:"since"`
		Reason string     `json:"reason"`
	}
	if err := json.Unmarshal(body, &st); code != http.StatusOK || err != nil || !st.Paused || st.Since == nil ||
		time.Since(*st.Since) > time.Minute || !strings.Contains(st.Reason, "POST /pause") {
		t.Fatalf("GET /pause while paused: %d %s (%v); want paused, since a moment ago, by POST /pause", code, body, err)
	}
	held := startReplay(`{"event_type": "order.replayed"}`)
	waitFor(t, 30*time.Second, "the replay started while paused to count its rows and wait", func() bool {
		p := progress(held)
		return p.Waiting == ops.ReplayWaitingPaused && p.Total == int64(len(evs))
	})
	// An observation window, not a synchronisation: a replay that publishes would
	// have published its 40 events within it many times over.
	consumer.WaitFor(2*time.Second, func() bool { return false })
	if n := replayed(held); n != 0 {
		t.Fatalf("a replay started while paused published %d records before the resume", n)
	}
	if p := progress(held); p.Sent != 0 || p.Done || p.Waiting != ops.ReplayWaitingPaused {
		t.Fatalf("replay progress while paused: %+v, want none sent, not done, waiting paused", p)
	}
	pause("resume")
	waitFor(t, 30*time.Second, "the held replay to finish after the resume", func() bool { return progress(held).Done })
	if pr.Sent != int64(len(evs)) || pr.Waiting != "" || pr.Error != "" {
		t.Fatalf("replay progress after the resume: %+v, want all %d sent, waiting nothing", pr, len(evs))
	}
	if !consumer.WaitFor(time.Minute, func() bool { return replayed(held) >= len(evs) }) || replayed(held) != len(evs) {
		t.Fatalf("consumed %d records of the held replay, want %d", replayed(held), len(evs))
	}

	// Paused while under way: 10 events a second, paused after the first few.
	paced := startReplay(`{"event_type": "order.replayed", "rate": 10}`)
	if !consumer.WaitFor(time.Minute, func() bool { return replayed(paced) >= 3 }) {
		t.Fatalf("the paced replay published %d records, want 3 before the pause", replayed(paced))
	}
	pause("pause")
	waitFor(t, 30*time.Second, "the paced replay to wait for the resume", func() bool {
		return progress(paced).Waiting == ops.ReplayWaitingPaused
	})
	// Observation windows: unpaused, the replay would be done within the first.
	consumer.WaitFor(2*time.Second, func() bool { return false })
	atPause := replayed(paced)
	consumer.WaitFor(2*time.Second, func() bool { return false })
	if n := replayed(paced); n != atPause || n >= len(evs) {
		t.Fatalf("the paced replay published %d records while paused (%d two seconds before), want it held short of %d",
			n, atPause, len(evs))
	}
	pause("resume")
	waitFor(t, 30*time.Second, "the paced replay to finish after the resume", func() bool { return progress(paced).Done })
	if pr.Sent != int64(len(evs)) || pr.Error != "" {
		t.Fatalf("paced replay after the resume: %+v, want all %d sent", pr, len(evs))
	}
	if !consumer.WaitFor(time.Minute, func() bool { return replayed(paced) >= len(evs) }) || replayed(paced) != len(evs) {
		t.Fatalf("consumed %d records of the paced replay, want %d", replayed(paced), len(evs))
	}
	code, body = adminCall(t, "GET", base+"/pause", "", "")
	st.Paused = true
	if err := json.Unmarshal(body, &st); code != http.StatusOK || err != nil || st.Paused {
		t.Fatalf("GET /pause after the resume: %d %s (%v), want paused false", code, body, err)
	}
}
