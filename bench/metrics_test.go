package main

import (
	"math"
	"strings"
	"testing"
)

const scrapeBefore = `# HELP walrelay_commit_to_ack_seconds Time from a transaction's commit to the broker's ack of its event.
# TYPE walrelay_commit_to_ack_seconds histogram
walrelay_commit_to_ack_seconds_bucket{le="0.001"} 0
walrelay_commit_to_ack_seconds_bucket{le="0.002"} 10
walrelay_commit_to_ack_seconds_bucket{le="0.004"} 20
walrelay_commit_to_ack_seconds_bucket{le="0.008"} 20
walrelay_commit_to_ack_seconds_bucket{le="+Inf"} 20
walrelay_commit_to_ack_seconds_sum 0.05
walrelay_commit_to_ack_seconds_count 20
outbox_events_published_total 20
walrelay_slot_active{slot="a b"} 1
`

// After: 1000 more observations: 500 in (1,2]ms, 490 in (2,4]ms, 9 in (4,8]ms, 1 above 8ms.
const scrapeAfter = `walrelay_commit_to_ack_seconds_bucket{le="0.001"} 0
walrelay_commit_to_ack_seconds_bucket{le="0.002"} 510
walrelay_commit_to_ack_seconds_bucket{le="0.004"} 1010
walrelay_commit_to_ack_seconds_bucket{le="0.008"} 1019
walrelay_commit_to_ack_seconds_bucket{le="+Inf"} 1020
walrelay_commit_to_ack_seconds_sum 3.05
walrelay_commit_to_ack_seconds_count 1020
outbox_events_published_total 1.02e+03
`

func TestHistogramDelta(t *testing.T) {
	before, err := parseSamples(strings.NewReader(scrapeBefore))
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseSamples(strings.NewReader(scrapeAfter))
	if err != nil {
		t.Fatal(err)
	}
	if got := after["outbox_events_published_total"]; got != 1020 {
		t.Errorf("published = %v, want 1020", got)
	}
	if got := before[`walrelay_slot_active{slot="a b"}`]; got != 1 {
		t.Errorf("label with a space: got %v, want 1", got)
	}
	h0, err := before.histogram("walrelay_commit_to_ack_seconds")
	if err != nil {
		t.Fatal(err)
	}
	h1, err := after.histogram("walrelay_commit_to_ack_seconds")
	if err != nil {
		t.Fatal(err)
	}
	d := h1.sub(h0)
	if d.total() != 1000 || d.Count != 1000 {
		t.Fatalf("delta total %v count %v, want 1000", d.total(), d.Count)
	}
	for _, tc := range []struct {
		q    float64
		want float64
	}{
		{0.01, 0.002},
		{0.50, 0.002},  // rank 500: the last of (1,2]ms
		{0.501, 0.004}, // rank 501
		{0.99, 0.004},  // rank 990
		{0.991, 0.008}, // rank 991
		{0.999, 0.008}, // rank 999
		{1, math.Inf(1)},
	} {
		if got := d.quantile(tc.q); got != tc.want {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := d.max(); !math.IsInf(got, 1) {
		t.Errorf("max = %v, want +Inf (one observation above the last bound)", got)
	}
	if got := h0.max(); got != 0.004 {
		t.Errorf("max before = %v, want 0.004", got)
	}
	if got := (histogram{}).quantile(0.5); !math.IsNaN(got) {
		t.Errorf("empty histogram quantile = %v, want NaN", got)
	}
}

func TestExactQuantile(t *testing.T) {
	v := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct{ q, want float64 }{{0.5, 5}, {0.99, 10}, {0.1, 1}, {1, 10}, {0, 1}} {
		if got := exactQuantile(v, tc.q); got != tc.want {
			t.Errorf("exactQuantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := exactQuantile(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("empty: %v, want NaN", got)
	}
}

func TestPayloadSeq(t *testing.T) {
	if n, ok := payloadSeq([]byte(`{"pad": "xx", "seq": 12345}`)); !ok || n != 12345 {
		t.Errorf("got %d %v", n, ok)
	}
	if _, ok := payloadSeq([]byte(`{"pad": "xx"}`)); ok {
		t.Error("found a seq where there is none")
	}
}
