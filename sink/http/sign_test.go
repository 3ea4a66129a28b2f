package http_test

import (
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// verifier checks a request with the specification's Go library, for each secret.
func verifier(t *testing.T, secrets ...string) func(r *nethttp.Request, body []byte, ignoreTime bool) error {
	var whs []*standardwebhooks.Webhook
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			t.Fatal(err)
		}
		whs = append(whs, wh)
	}
	return func(r *nethttp.Request, body []byte, ignoreTime bool) error {
		for _, wh := range whs {
			var err error
			if ignoreTime {
				err = wh.VerifyIgnoringTimestamp(body, r.Header)
			} else {
				err = wh.Verify(body, r.Header)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// During a key rotation every request carries a signature under each secret, so
// a receiver that knows either one verifies it; the secrets come from the
// environment and from a file holding several.
func TestSignedForEachSecret(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "secrets")
	if err := os.WriteFile(file, []byte(secret(1)+"\n"+secret(2)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WALRELAY_TEST_SECRET", secret(3))
	verifyEach := []func(*nethttp.Request, []byte, bool) error{verifier(t, secret(1)), verifier(t, secret(2)), verifier(t, secret(3))}
	other := verifier(t, secret(9))
	var mu sync.Mutex
	var failures []string
	n := 0
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		n++
		for i, v := range verifyEach {
			if err := v(r, body, false); err != nil {
				failures = append(failures, "secret "+strconv.Itoa(i+1)+": "+err.Error())
			}
		}
		if other(r, body, false) == nil {
			failures = append(failures, "a secret the sink does not have verifies")
		}
		w.WriteHeader(nethttp.StatusOK)
	}))
	defer srv.Close()
	cfg := config(srv.URL)
	cfg.SigningSecrets = []string{"file:" + file, "env:WALRELAY_TEST_SECRET"}
	s := newSink(t, cfg)
	o := newOutcomes()
	for _, id := range ids("e", 20) {
		s.Publish(event(id, "order", id), o.done(id))
	}
	flush(t, s)
	for _, id := range ids("e", 20) {
		if err := o.wait(t, id); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if n != 20 || len(failures) > 0 {
		t.Fatalf("%d requests, failures: %v", n, failures)
	}
}

// A retry more than 5 minutes after the first attempt is signed again with its own
// time: the library refuses the first attempt's timestamp by then, and verifies the
// retry. The sink's clock is fake; the receiver's is real.
func TestRetryIsSignedAgain(t *testing.T) {
	verify := verifier(t, secret(1))
	real := time.Now()
	clk := &clock{now: real.Add(-6 * time.Minute)} // the first attempt, 6 minutes ago to the receiver
	var mu sync.Mutex
	var stamps []string
	var problems []string
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		stamps = append(stamps, r.Header.Get("Webhook-Timestamp"))
		if len(stamps) == 1 {
			if verify(r, body, false) == nil {
				problems = append(problems, "a 6-minute-old timestamp verified; the test proves nothing")
			}
			if err := verify(r, body, true); err != nil {
				problems = append(problems, "first attempt's signature: "+err.Error())
			}
			clk.Set(time.Now()) // the retry happens now
			w.WriteHeader(nethttp.StatusServiceUnavailable)
			return
		}
		if err := verify(r, body, false); err != nil {
			problems = append(problems, "retry: "+err.Error()) // answered 200 all the same, so that the test ends
		}
		w.WriteHeader(nethttp.StatusOK)
	}))
	defer srv.Close()
	cfg := config(srv.URL)
	cfg.SigningSecrets = []string{"env:WALRELAY_TEST_SECRET"}
	cfg.Now = clk.Now
	t.Setenv("WALRELAY_TEST_SECRET", secret(1))
	s := newSink(t, cfg)
	o := newOutcomes()
	ev := event("e-1", "order", "o1")
	ev.CreatedAt = real.Add(-time.Hour) // a backlog's event
	s.Publish(ev, o.done(ev.ID))
	if err := o.wait(t, ev.ID); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 || len(stamps) != 2 {
		t.Fatalf("%d attempts (timestamps %v); problems: %v", len(stamps), stamps, problems)
	}
	first, _ := strconv.ParseInt(stamps[0], 10, 64)
	second, _ := strconv.ParseInt(stamps[1], 10, 64)
	if second-first < 300 {
		t.Fatalf("timestamps %v: the retry is not more than 5 minutes later", stamps)
	}
}
