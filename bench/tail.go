package main

import (
	"math"
	"slices"
	"time"
)

// slowMillis is where the per-second table starts counting an event as slow.
const slowMillis = 10

// secondTail is one second of a fixed-rate load step: the events whose insert
// committed in that second (counted from the step's start) and how long they took.
// The slow events of a run cluster in a few seconds (warm-up, episodes) rather than
// spreading evenly, so a table by second shows where a percentile comes from.
type secondTail struct {
	Second int `json:"second"` // 0 is the step's first second
	Count  int `json:"count"`
	// Commit to consume (the harness's client-side commit to the record fetched).
	P99ms jsonFloat `json:"commit_to_consume_p99_ms"`
	Maxms jsonFloat `json:"commit_to_consume_max_ms"`
	Slow  int       `json:"commit_to_consume_over_10ms"`
	// The row's created_at to the relay handing the record to the producer (the
	// record's timestamp): the relay's share, without the broker and the consumer.
	HandoverMaxms jsonFloat `json:"created_to_handover_max_ms"`
	HandoverSlow  int       `json:"created_to_handover_over_10ms"`
}

// sample is one event of a load step: when it committed and its two latencies.
type sample struct {
	commitAt   int64   // Unix nanoseconds
	e2eMs      float64 // commit to consume
	handoverMs float64 // created_at to hand-over; NaN when the record did not say
}

// perSecond buckets samples by the second of start their commit fell in.
func perSecond(samples []sample, start time.Time) []secondTail {
	var buckets [][]sample
	for _, s := range samples {
		sec := max(int(time.Duration(s.commitAt-start.UnixNano())/time.Second), 0)
		for len(buckets) <= sec {
			buckets = append(buckets, nil)
		}
		buckets[sec] = append(buckets[sec], s)
	}
	out := make([]secondTail, len(buckets))
	for i, b := range buckets {
		nan := jsonFloat(math.NaN())
		t := secondTail{Second: i, Count: len(b), P99ms: nan, Maxms: nan, HandoverMaxms: nan}
		e2e := make([]float64, 0, len(b))
		handoverMax := -1.0
		for _, s := range b {
			e2e = append(e2e, s.e2eMs)
			if s.e2eMs > slowMillis {
				t.Slow++
			}
			if !math.IsNaN(s.handoverMs) {
				handoverMax = max(handoverMax, s.handoverMs)
				if s.handoverMs > slowMillis {
					t.HandoverSlow++
				}
			}
		}
		slices.Sort(e2e)
		if len(e2e) > 0 {
			t.P99ms = jsonFloat(exactQuantile(e2e, 0.99))
			t.Maxms = jsonFloat(e2e[len(e2e)-1])
		}
		if handoverMax >= 0 {
			t.HandoverMaxms = jsonFloat(handoverMax)
		}
		out[i] = t
	}
	return out
}

// quantiles returns the p50, p99 and p99.9 (nearest rank) and the maximum of values,
// which it sorts.
func quantiles(values []float64) (p50, p99, p999, maxv float64) {
	slices.Sort(values)
	return exactQuantile(values, 0.50), exactQuantile(values, 0.99), exactQuantile(values, 0.999), exactQuantile(values, 1)
}
