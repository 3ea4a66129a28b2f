package http_test

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	httpsink "github.com/walrelay/walrelay/sink/http"
)

// Each aggregate's events arrive one request at a time and in order, through
// failures of the receiver, while different aggregates are sent in parallel up to
// http-max-connections over TLS with HTTP/2.
func TestOrderPerAggregate(t *testing.T) {
	const aggregates, perAggregate, maxConns = 12, 40, 4
	var mu sync.Mutex
	inFlight := map[string]int{}
	parallel, mostParallel := 0, 0
	delivered := map[string][]string{} // aggregate -> ids taken, in arrival order
	attempts := map[string]int{}
	var problems []string
	var protos = map[string]int{}
	srv := httptest.NewUnstartedServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		agg, id := r.Header.Get("Aggregate-Id"), r.Header.Get("Webhook-Id")
		mu.Lock()
		protos[r.Proto]++
		inFlight[agg]++
		parallel++
		mostParallel = max(mostParallel, parallel)
		if inFlight[agg] > 1 {
			problems = append(problems, "two requests at once for "+agg)
		}
		attempts[id]++
		fail := attempts[id] == 1 && len(id)%3 == 0 // some first attempts fail
		mu.Unlock()
		time.Sleep(time.Millisecond) // a receiver's work, so that requests overlap
		mu.Lock()
		inFlight[agg]--
		parallel--
		if !fail {
			delivered[agg] = append(delivered[agg], id)
		}
		mu.Unlock()
		if fail {
			w.WriteHeader(nethttp.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(nethttp.StatusOK)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := x509.ParseCertificate(srv.Certificate().Raw); err != nil {
		t.Fatal(err)
	}
	cfg := config(srv.URL + "/hooks")
	cfg.CAFile = ca
	cfg.MaxConnections = maxConns
	s := newSink(t, cfg)
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("ping over TLS: %v", err)
	}
	o := newOutcomes()
	want := map[string][]string{}
	for i := range perAggregate {
		for a := range aggregates {
			agg := fmt.Sprintf("agg-%02d", a)
			id := fmt.Sprintf("%s-ev-%03d", agg, i)
			want[agg] = append(want[agg], id)
			s.Publish(event(id, "order", agg), o.done(id))
		}
	}
	flush(t, s)
	for _, evs := range want {
		for _, id := range evs {
			if err := o.wait(t, id); err != nil {
				t.Fatalf("event %s: %v", id, err)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatal(problems[0])
	}
	for agg, ids := range want {
		if fmt.Sprint(delivered[agg]) != fmt.Sprint(ids) {
			t.Fatalf("aggregate %s arrived as %v, want %v", agg, delivered[agg], ids)
		}
	}
	if mostParallel < 2 || mostParallel > maxConns {
		t.Fatalf("at most %d requests at once, want 2 to %d", mostParallel, maxConns)
	}
	if protos["HTTP/2.0"] == 0 || len(protos) != 1 {
		t.Fatalf("protocols %v, want HTTP/2.0 only", protos)
	}
}

// Publish returns at once while the receiver answers nothing, for thousands of
// events of one aggregate and of many; they are all delivered once it answers.
func TestPublishNeverBlocks(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	n := 0
	conns := map[string]bool{} // client addresses: connections kept alive are few
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-release
		mu.Lock()
		n++
		conns[r.RemoteAddr] = true
		mu.Unlock()
		w.WriteHeader(204)
	}))
	defer srv.Close()
	cfg := config(srv.URL)
	cfg.Timeout = time.Minute
	s := newSink(t, cfg)
	o := newOutcomes()
	const total = 5000
	var slowest time.Duration
	for i := range total {
		agg := "one"
		if i%2 == 1 {
			agg = fmt.Sprintf("many-%d", i)
		}
		id := fmt.Sprintf("e-%05d", i)
		t0 := time.Now()
		s.Publish(event(id, "order", agg), o.done(id))
		slowest = max(slowest, time.Since(t0))
	}
	close(release)
	flush(t, s)
	// A Publish that waited on the receiver would not return before release, which
	// comes after the loop; the bound leaves room for a race-detector run on a busy
	// machine, where a call that only takes a lock can still be descheduled.
	if slowest > 2*time.Second {
		t.Errorf("a Publish call took %s", slowest)
	}
	mu.Lock()
	defer mu.Unlock()
	if n != total {
		t.Fatalf("%d requests, want %d", n, total)
	}
	if len(conns) > httpsink.DefaultMaxConnections {
		t.Fatalf("%d requests over %d connections, want at most %d kept alive", n, len(conns), httpsink.DefaultMaxConnections)
	}
}
