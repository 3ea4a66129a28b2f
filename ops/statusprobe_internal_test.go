package ops

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// probeRelay reads /readyz by its status code, takes its body as the reason, reads
// the time of the last event confirmation from /metrics, and does not take a relay
// of another slot for this one.
func TestProbeRelay(t *testing.T) {
	serve := func(ready int, body, metrics string) string {
		mux := http.NewServeMux()
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(ready)
			_, _ = w.Write([]byte(body))
		})
		mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(metrics)) })
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	const ours = "# TYPE walrelay_slot_active gauge\nwalrelay_slot_active{slot=\"s1\"} 1\n" +
		"walrelay_events_confirmed_timestamp_seconds 1.7000000005e+09\n"
	ctx := context.Background()

	h := probeRelay(ctx, serve(http.StatusOK, "streaming\n", ours), "s1", "")
	at := time.Unix(1_700_000_000, 500_000_000).UTC()
	if !h.Reachable || !h.Ready || h.Answer != "streaming" || h.EventsConfirmedAt == nil || !h.EventsConfirmedAt.Equal(at) {
		t.Errorf("a ready relay: %+v (confirmed at %v), want ready, its answer and events confirmed at %v", h, h.EventsConfirmedAt, at)
	}
	h = probeRelay(ctx, serve(http.StatusServiceUnavailable, "broker: no acknowledgement for 12s\n", ours), "s1", "")
	if !h.Reachable || h.Ready || h.Answer != "broker: no acknowledgement for 12s" {
		t.Errorf("a relay not ready: %+v, want reachable, not ready, with its reason", h)
	}
	h = probeRelay(ctx, serve(http.StatusServiceUnavailable, "", "walrelay_events_confirmed_timestamp_seconds 0\n"), "s1", "")
	if !h.Reachable || h.Ready || h.Answer != "503 Service Unavailable" || h.EventsConfirmedAt != nil {
		t.Errorf("a relay not ready, saying nothing, before any confirmation: %+v", h)
	}
	h = probeRelay(ctx, serve(http.StatusOK, "streaming", "walrelay_slot_active{slot=\"other\"} 1\n"), "s1", "")
	if h.Reachable || h.Error == "" {
		t.Errorf("a relay of another slot: %+v, want it not taken for this slot's", h)
	}
	h = probeRelay(ctx, "http://127.0.0.1:1", "s1", "")
	if h.Reachable || h.Error == "" {
		t.Errorf("no relay: %+v, want unreachable with the reason", h)
	}
}
