package main_test

import (
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
)

// walrelay run with OTEL_EXPORTER_OTLP_ENDPOINT set exports one span per event it
// published, flushed on a graceful stop.
func TestRunExportsEventSpans(t *testing.T) {
	t.Parallel()
	rcv := testenv.NewOTLPReceiver(t)
	dbURL := testenv.MigratedDatabase(t)
	kafka := testenv.Kafka(t)
	brokers := kafka.ListenAddrs()
	slot := slotName(t, "")
	conn := testenv.Connect(t, dbURL)
	p := startProc(t, "relay", relayEnv(dbURL, brokers, "OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.URL,
		"OTEL_BSP_SCHEDULE_DELAY=60000"), "run", "--slot", slot)
	waitStreaming(t, conn, slot, p)
	consumer := testenv.NewConsumer(t, brokers, `outbox\..*`)
	var ids []string
	for range 3 {
		for _, ev := range testenv.WriteTx(t, conn, []string{"a", "b"}, "order_created", 7, false) {
			ids = append(ids, ev.ID)
		}
	}
	if !consumer.WaitDistinct(60*time.Second, len(ids)) {
		t.Fatalf("consumed %d distinct events of %d", consumer.Distinct(), len(ids))
	}
	p.stop(20 * time.Second) // the batch delay is a minute: only the shutdown's flush exports
	got := rcv.Count("messaging.message.id")
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("event %s: %d spans exported, want 1", id, got[id])
		}
	}
	if len(got) != len(ids) {
		t.Errorf("spans for %d events exported, want %d", len(got), len(ids))
	}
}
