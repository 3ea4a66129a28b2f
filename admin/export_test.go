package admin

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"time"

	"github.com/walrelay/walrelay/ops"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/relay"
)

// FixedConsole serves the console's own files with an admin API that answers the
// same figures every time, dated from now: what the screenshots in docs/console/
// are taken from (TestConsoleScreenshots), so that two runs differ in rendering
// only. It answers the GET requests the page makes on its three tabs; anything
// else is 404. addr is the listener's, for the console's Host check.
func FixedConsole(addr net.Addr, now time.Time) http.Handler {
	now = now.UTC()
	mux := http.NewServeMux()
	consoleHandlers(mux, Options{}, addr)
	at := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	answer := func(path string, v any) {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, v) })
	}

	sink := &ops.SinkStatus{Kind: "kafka", Brokers: []string{"kafka-1.internal:9092", "kafka-2.internal:9092", "kafka-3.internal:9092"},
		TopicTemplate: "outbox.event.{aggregate_type}"}
	build := &ops.BuildStatus{Version: "v1.4.0", Revision: "0848fd0"}
	answer("/databases", map[string][]string{"databases": {"orders"}})
	answer("/status", ops.NewStatusReport(&ops.Status{
		Slot: "walrelay_orders", SlotExists: true, SlotActive: true, ConfirmedLSN: "3/5A1C2F88", LagBytes: 48_312,
		WALStatus: "reserved", LastStatusUpdate: at(2 * time.Second), Publication: "walrelay_orders", PublicationExists: true,
		OnPublish: poller.Progress, PendingRows: 2, RetryingRows: 2, DeadLetters: 3, OldestPendingAge: 4.2,
		Relay: &ops.RelayHealth{URL: "self", Reachable: true, Ready: true, Answer: "streaming",
			EventsConfirmedAt: at(time.Second), State: ops.StateStreaming},
		Sink: sink, Build: build, Problems: []ops.Problem{},
	}))

	// An hour of samples at 10 s: a daily pattern's hour, with a burst 20 minutes ago.
	const n = 360
	samples := make([]relay.Sample, n)
	for i := range samples {
		ago := time.Duration(n-1-i) * 10 * time.Second
		x := float64(i) / n
		rate := 180 + 60*math.Sin(2*math.Pi*x) + 25*math.Sin(17*x)
		if m := ago.Minutes(); m > 18 && m < 23 {
			rate += 900 * math.Sin(math.Pi*(m-18)/5)
		}
		samples[i] = relay.Sample{At: now.Add(-ago), EventsPerSecond: math.Round(rate*10) / 10,
			AckLatencySeconds: 0.004 + 0.002*math.Sin(11*x) + rate/1e6, LagBytes: int64(20_000 + 40*rate),
			LagSeconds: math.Round(rate/900*10) / 10, Pending: int64(rate / 20), DeadLetters: 3}
		if i < 120 {
			samples[i].DeadLetters = 1
		}
	}
	latest := samples[n-1]
	answer("/overview", overview{Database: "orders", State: ops.StateStreaming, Reason: "streaming",
		StatsIntervalSeconds: 10, Latest: &latest, Samples: samples, Sink: sink, Build: build})

	letters := []ops.TableDeadLetter{
		{Table: "public.outbox_events", DeadLetter: poller.DeadLetter{ID: "0193a8c2-5f1e-7c4a-9b7e-2d41c6e0a911",
			AggregateType: "order", AggregateID: "order-48213", EventType: "order.created", Attempts: 5,
			LastError: "record is too large: 1.4 MiB, the topic's max.message.bytes is 1 MiB", CreatedAt: *at(52 * time.Minute), DeadLetteredAt: *at(41 * time.Minute)}},
		{Table: "public.outbox_events", DeadLetter: poller.DeadLetter{ID: "0193a8d7-09b3-7e12-8c55-7f3a90b1c2d4",
			AggregateType: "payment", AggregateID: "pay-90017", EventType: "payment.captured", Attempts: 5,
			LastError: "schema registry: subject payment-value: incompatible schema", CreatedAt: *at(19 * time.Minute), DeadLetteredAt: *at(12 * time.Minute)}},
		{Table: "billing.outbox", DeadLetter: poller.DeadLetter{ID: "0193a8e1-77c0-7a8d-b3f2-1e5d8c4a6b70",
			AggregateType: "invoice", AggregateID: "inv-2026-1207-0031", EventType: "invoice.issued", Attempts: 5,
			LastError: "payload column is NULL", CreatedAt: *at(6 * time.Minute), DeadLetteredAt: *at(3 * time.Minute)}},
	}
	answer("/dlq", deadLetterPage{DeadLetters: letters, Limit: 50})
	for _, l := range letters {
		answer("/dlq/"+l.ID+"/record", ops.RecordPreview{Table: l.Table, ID: l.ID, Topic: "outbox.event." + l.AggregateType,
			Key: ops.PreviewBytes{Text: l.AggregateID, Encoding: "utf-8"},
			Value: ops.PreviewBytes{Text: fmt.Sprintf(`{"id":%q,"type":%q,"total":{"amount":"129.90","currency":"EUR"},"lines":3}`,
				l.AggregateID, l.EventType), Encoding: "utf-8"},
			Headers: []ops.PreviewField{{Key: "id", Value: ops.PreviewBytes{Text: l.ID, Encoding: "utf-8"}},
				{Key: "eventType", Value: ops.PreviewBytes{Text: l.EventType, Encoding: "utf-8"}}}})
	}

	answer("/replay", map[string][]recentReplay{"replays": {
		{ops.ReplayProgress{ID: "r-000003", Total: 12_480, Sent: 7_310, Rate: 1_850, ETA: "3s", StartedAt: *at(4 * time.Second)},
			ops.ReplayFilter{Since: *at(2 * time.Hour), EventType: "order.created"}},
		{ops.ReplayProgress{ID: "r-000002", Total: 12_480, DryRun: true, Done: true, StartedAt: *at(40 * time.Second)},
			ops.ReplayFilter{Since: *at(2 * time.Hour), EventType: "order.created"}},
		{ops.ReplayProgress{ID: "r-000001", Total: 3, Sent: 3, Done: true, StartedAt: *at(26 * time.Minute)},
			ops.ReplayFilter{AggregateType: "payment", AggregateID: "pay-90017"}},
	}})
	return mux
}
