package http_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/sink"
)

func isFinal(err error) bool { return sink.IsFinal(err) }

// script is a receiver that answers each request with the next of its answers,
// then 200; it remembers what the sink reported as its last error when each
// request came.
type script struct {
	mu      sync.Mutex
	answers []func(w nethttp.ResponseWriter, r *nethttp.Request)
	times   []time.Time
	lastErr []error
	paths   []string
	snk     interface{ LastError() error }
}

func (s *script) ServeHTTP(w nethttp.ResponseWriter, r *nethttp.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	i := len(s.times)
	s.times = append(s.times, time.Now())
	s.paths = append(s.paths, r.URL.EscapedPath())
	if s.snk != nil {
		s.lastErr = append(s.lastErr, s.snk.LastError())
	}
	var answer func(nethttp.ResponseWriter, *nethttp.Request)
	if i < len(s.answers) {
		answer = s.answers[i]
	}
	s.mu.Unlock()
	if answer == nil {
		w.WriteHeader(nethttp.StatusOK)
		return
	}
	answer(w, r)
}

func status(code int, body string, header ...string) func(nethttp.ResponseWriter, *nethttp.Request) {
	return func(w nethttp.ResponseWriter, _ *nethttp.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// Statuses that mean the receiver is unavailable, or the endpoint unusable, hold
// the event and send it again until it is taken: never an event error, and the sink
// reports the failure meanwhile. Statuses about the event are event errors (not
// final: the poller retries them) with the status and the body's first bytes.
func TestOutcomeClasses(t *testing.T) {
	hangUp := func(w nethttp.ResponseWriter, _ *nethttp.Request) {
		conn, _, err := w.(nethttp.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	slow := func(w nethttp.ResponseWriter, r *nethttp.Request) { <-r.Context().Done() } // past http-timeout
	held := []struct {
		name      string
		templated bool
		answer    func(nethttp.ResponseWriter, *nethttp.Request)
		reported  string
	}{
		{"connection closed", false, hangUp, "EOF"},
		{"timeout", false, slow, "Client.Timeout"},
		{"408", false, status(408, ""), "408"},
		{"429", false, status(429, ""), "429"},
		{"500", false, status(500, "boom"), "500"},
		{"502", true, status(502, ""), "502"},
		{"503", false, status(503, ""), "503"},
		{"401", false, status(401, "who?"), "401"},
		{"403", true, status(403, ""), "403"},
		{"404 untemplated", false, status(404, ""), "404"},
		{"405 untemplated", false, status(405, ""), "405"},
	}
	for _, tc := range held {
		t.Run("held/"+tc.name, func(t *testing.T) {
			sc := &script{answers: []func(nethttp.ResponseWriter, *nethttp.Request){tc.answer, tc.answer}}
			srv := httptest.NewServer(sc)
			defer srv.Close()
			url := srv.URL + "/hooks"
			if tc.templated {
				url += "/{aggregate_type}"
			}
			cfg := config(url)
			cfg.Timeout = 300 * time.Millisecond
			s := newSink(t, cfg)
			sc.mu.Lock()
			sc.snk = s
			sc.mu.Unlock()
			o := newOutcomes()
			s.Publish(event("e-1", "order", "o1"), o.done("e-1"))
			if err := o.wait(t, "e-1"); err != nil {
				t.Fatalf("outcome %v, want delivery after the retries", err)
			}
			sc.mu.Lock()
			defer sc.mu.Unlock()
			if len(sc.times) != 3 {
				t.Fatalf("%d attempts, want 3", len(sc.times))
			}
			for i := 1; i < 3; i++ {
				if err := sc.lastErr[i]; err == nil || !strings.Contains(err.Error(), tc.reported) {
					t.Errorf("attempt %d: sink reported %v, want an error with %q", i+1, err, tc.reported)
				}
			}
			if err := s.LastError(); err != nil {
				t.Errorf("after the delivery the sink still reports %v", err)
			}
		})
	}

	refused := []struct {
		name      string
		templated bool
		code      int
	}{
		{"400", false, 400}, {"413", false, 413}, {"415", false, 415}, {"422", true, 422},
		{"404 templated", true, 404}, {"410 templated", true, 410}, {"409", false, 409},
	}
	for _, tc := range refused {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			long := strings.Repeat("x", 1000)
			sc := &script{answers: []func(nethttp.ResponseWriter, *nethttp.Request){status(tc.code, "bad field amount"+long)}}
			srv := httptest.NewServer(sc)
			defer srv.Close()
			url := srv.URL + "/hooks"
			if tc.templated {
				url += "?type={event_type}"
			}
			s := newSink(t, config(url))
			o := newOutcomes()
			s.Publish(event("e-1", "order", "o1"), o.done("e-1"))
			err := o.wait(t, "e-1")
			if !sink.IsEventError(err) || sink.IsFinal(err) {
				t.Fatalf("outcome %v, want an event error the poller retries", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, fmt.Sprint(tc.code)) || !strings.Contains(msg, "bad field amount") || strings.Contains(msg, long[:300]) {
				t.Errorf("error %q: want the status and the body's first bytes only", msg)
			}
			sc.mu.Lock()
			defer sc.mu.Unlock()
			if len(sc.times) != 1 {
				t.Errorf("%d attempts, want 1 (the poller retries)", len(sc.times))
			}
		})
	}
}

// 429 and 503 wait as long as Retry-After says before the next attempt.
func TestRetryAfterIsHonoured(t *testing.T) {
	sc := &script{answers: []func(nethttp.ResponseWriter, *nethttp.Request){status(429, "", "Retry-After", "2")}}
	srv := httptest.NewServer(sc)
	defer srv.Close()
	s := newSink(t, config(srv.URL))
	o := newOutcomes()
	s.Publish(event("e-1", "order", "o1"), o.done("e-1"))
	if err := o.wait(t, "e-1"); err != nil {
		t.Fatal(err)
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if len(sc.times) != 2 {
		t.Fatalf("%d attempts, want 2", len(sc.times))
	}
	if gap := sc.times[1].Sub(sc.times[0]); gap < 2*time.Second {
		t.Fatalf("retried after %s, Retry-After said 2s", gap)
	}
}

// 307 and 308 to the same host are followed with the body and the signature; any
// other redirect, or one to another host, holds the event with an error naming
// the target.
func TestRedirects(t *testing.T) {
	other := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, _ *nethttp.Request) { w.WriteHeader(200) }))
	defer other.Close()
	verify := verifier(t, secret(1))
	t.Setenv("WALRELAY_TEST_SECRET", secret(1))

	var mu sync.Mutex
	var final []error // verification of each request that reached /final
	mux := nethttp.NewServeMux()
	mux.HandleFunc("/final", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		final = append(final, verify(r, body, false))
		if r.Method != "POST" || len(body) == 0 {
			final = append(final, fmt.Errorf("%s with %d bytes", r.Method, len(body)))
		}
		mu.Unlock()
		w.WriteHeader(200)
	})
	for _, code := range []int{307, 308} {
		mux.HandleFunc(fmt.Sprintf("/same%d", code), func(w nethttp.ResponseWriter, r *nethttp.Request) {
			nethttp.Redirect(w, r, "/final", code)
		})
	}
	mux.HandleFunc("/found", func(w nethttp.ResponseWriter, r *nethttp.Request) { nethttp.Redirect(w, r, "/final", 302) })
	mux.HandleFunc("/away", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		nethttp.Redirect(w, r, other.URL+"/elsewhere", 307)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, path := range []string{"/same307", "/same308"} {
		cfg := config(srv.URL + path)
		cfg.SigningSecrets = []string{"env:WALRELAY_TEST_SECRET"}
		s := newSink(t, cfg)
		o := newOutcomes()
		s.Publish(event("e"+path, "order", "o1"), o.done("e"+path))
		if err := o.wait(t, "e"+path); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	mu.Lock()
	if len(final) != 2 || errors.Join(final...) != nil {
		t.Fatalf("followed redirects: %v", final)
	}
	mu.Unlock()

	for path, target := range map[string]string{"/found": srv.URL + "/final", "/away": other.URL + "/elsewhere"} {
		s := newSink(t, config(srv.URL+path))
		o := newOutcomes()
		s.Publish(event("e"+path, "order", "o1"), o.done("e"+path))
		testenv.Eventually(30*time.Second, func() bool { return s.LastError() != nil })
		err := s.LastError()
		if err == nil || !strings.Contains(err.Error(), target) {
			t.Fatalf("%s: sink reports %v, want an error naming %s", path, err, target)
		}
		o.mu.Lock()
		if n := len(o.errs["e"+path]); n != 0 {
			t.Errorf("%s: the event was settled (%v); it should be held", path, o.errs["e"+path])
		}
		o.mu.Unlock()
		s.Close()
		if err := o.wait(t, "e"+path); !errors.Is(err, errClosed()) {
			t.Errorf("%s: after Close: %v", path, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(final) != 2 {
		t.Fatalf("a refused redirect was followed: %d requests at /final", len(final))
	}
}

// Ping connects and sends no request; a closed port fails it.
func TestPingSendsNoRequest(t *testing.T) {
	sc := &script{}
	srv := httptest.NewServer(sc)
	defer srv.Close()
	s := newSink(t, config(srv.URL+"/hooks/{aggregate_type}"))
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	sc.mu.Lock()
	if len(sc.times) != 0 {
		t.Fatalf("Ping sent %d requests", len(sc.times))
	}
	sc.mu.Unlock()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if err := newSink(t, config("http://"+addr+"/")).Ping(t.Context()); err == nil {
		t.Fatal("Ping of a closed port succeeded")
	}
}
