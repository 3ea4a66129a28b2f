package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// samples are one scrape of a Prometheus text exposition: "name{labels}" to value.
type samples map[string]float64

// parseSamples reads the text format (version 0.0.4) that promhttp serves to a client
// that asks for nothing else. Comments are skipped; a timestamp after the value is
// ignored.
func parseSamples(r io.Reader) (samples, error) {
	out := samples{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		// The value follows the series; label values may hold spaces, so split after
		// the closing brace when there is one.
		rest := line
		key := ""
		if i := strings.LastIndexByte(line, '}'); i >= 0 {
			key, rest = line[:i+1], strings.TrimSpace(line[i+1:])
		} else {
			f := strings.Fields(line)
			if len(f) < 2 {
				return nil, fmt.Errorf("metrics line %q: no value", line)
			}
			key, rest = f[0], strings.Join(f[1:], " ")
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("metrics line %q: no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		out[key] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
}

// scrape fetches and parses a /metrics page.
func scrape(ctx context.Context, url string) (samples, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	// Uncompressed: the harness scrapes every 20-500ms during a drain, and each gzip
	// answer costs the relay CPU and a compressor (about 1 MiB, pooled) that a
	// collection then finds live, which a Prometheus scraping every 15s does not.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	return parseSamples(resp.Body)
}

// bucket is one cumulative histogram bucket: Count observations were <= UpperBound.
type bucket struct {
	UpperBound float64
	Count      float64
}

// histogram is a Prometheus histogram's buckets (sorted, cumulative, +Inf last),
// count and sum.
type histogram struct {
	Buckets []bucket
	Count   float64
	Sum     float64
}

// histogramOf extracts the histogram called name (without labels besides le).
func (s samples) histogram(name string) (histogram, error) {
	var h histogram
	prefix := name + `_bucket{le="`
	for key, v := range s {
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		le := strings.TrimSuffix(strings.TrimPrefix(key, prefix), `"}`)
		ub, err := strconv.ParseFloat(le, 64) // "+Inf" parses to +Inf
		if err != nil {
			return h, fmt.Errorf("histogram %s: bucket %q: %w", name, le, err)
		}
		h.Buckets = append(h.Buckets, bucket{UpperBound: ub, Count: v})
	}
	if len(h.Buckets) == 0 {
		return h, fmt.Errorf("histogram %s not found in the scrape", name)
	}
	sort.Slice(h.Buckets, func(i, j int) bool { return h.Buckets[i].UpperBound < h.Buckets[j].UpperBound })
	h.Count = s[name+"_count"]
	h.Sum = s[name+"_sum"]
	return h, nil
}

// sub returns the observations made between before and h (two scrapes of one
// histogram with the same buckets).
func (h histogram) sub(before histogram) histogram {
	out := histogram{Count: h.Count - before.Count, Sum: h.Sum - before.Sum}
	prev := map[float64]float64{}
	for _, b := range before.Buckets {
		prev[b.UpperBound] = b.Count
	}
	for _, b := range h.Buckets {
		out.Buckets = append(out.Buckets, bucket{UpperBound: b.UpperBound, Count: b.Count - prev[b.UpperBound]})
	}
	return out
}

// quantile returns the upper bound of the bucket holding the q-th observation
// (0 < q <= 1): the true value is at most that, and above the previous bound. This is
// bucket resolution, not interpolation. It returns +Inf when the observation lies
// beyond the last finite bound, and NaN when there are no observations.
func (h histogram) quantile(q float64) float64 {
	total := h.total()
	if total <= 0 {
		return math.NaN()
	}
	rank := math.Ceil(q * total)
	if rank < 1 {
		rank = 1
	}
	for _, b := range h.Buckets {
		if b.Count >= rank {
			return b.UpperBound
		}
	}
	return math.Inf(1)
}

// max returns the upper bound of the highest bucket that gained an observation.
func (h histogram) max() float64 {
	total := h.total()
	if total <= 0 {
		return math.NaN()
	}
	for _, b := range h.Buckets {
		if b.Count >= total {
			return b.UpperBound
		}
	}
	return math.Inf(1)
}

// total is the number of observations: the +Inf bucket, or Count when absent.
func (h histogram) total() float64 {
	if n := len(h.Buckets); n > 0 && math.IsInf(h.Buckets[n-1].UpperBound, 1) {
		return h.Buckets[n-1].Count
	}
	return h.Count
}

// exactQuantile returns the q-th smallest of sorted values (nearest rank).
func exactQuantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}
