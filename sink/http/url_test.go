package http_test

import (
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	httpsink "github.com/walrelay/walrelay/sink/http"
)

// Hostile aggregate and event types stay within their place in the URL: a path
// value in its one segment, a query value in its one parameter; "." and ".." are
// refused with the event.
func TestURLTemplateEscapes(t *testing.T) {
	type hit struct {
		path  string
		query map[string][]string
	}
	var mu sync.Mutex
	var hits []hit
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		hits = append(hits, hit{r.URL.EscapedPath(), r.URL.Query()})
		mu.Unlock()
		w.WriteHeader(200)
	}))
	defer srv.Close()
	s := newSink(t, config(srv.URL+"/hooks/{aggregate_type}/in?type={event_type}&v=1"))
	hostile := []string{"../admin", "x?y", "%2F", "a/b", "a b#c", "x&admin=1", "é"}
	o := newOutcomes()
	for _, v := range hostile {
		ev := event("e-"+v, v, "o1")
		ev.EventType = v
		s.Publish(ev, o.done(ev.ID))
		if err := o.wait(t, ev.ID); err != nil {
			t.Fatalf("%q: %v", v, err)
		}
	}
	mu.Lock()
	if len(hits) != len(hostile) {
		t.Fatalf("%d requests, want %d", len(hits), len(hostile))
	}
	for i, v := range hostile {
		h := hits[i]
		segs := strings.Split(strings.TrimPrefix(h.path, "/"), "/")
		if len(segs) != 3 || segs[0] != "hooks" || segs[2] != "in" {
			t.Errorf("%q: path %s leaves its segment", v, h.path)
			continue
		}
		if got, _ := unescapePath(segs[1]); got != v {
			t.Errorf("%q: path segment %s means %q", v, segs[1], got)
		}
		if len(h.query) != 2 || len(h.query["type"]) != 1 || h.query["type"][0] != v || h.query["v"][0] != "1" {
			t.Errorf("%q: query %v", v, h.query)
		}
	}
	mu.Unlock()

	for _, v := range []string{".", ".."} {
		ev := event("e-dot"+v, v, "o1")
		s.Publish(ev, o.done(ev.ID))
		if err := o.wait(t, ev.ID); !isFinal(err) {
			t.Errorf("aggregate type %q: %v, want a final event error", v, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(hits) != len(hostile) {
		t.Fatalf("a dot segment was sent")
	}
}

// The host cannot be templated, and credentials cannot be written in the URL.
func TestURLValidation(t *testing.T) {
	for raw, want := range map[string]string{
		"http://{aggregate_type}.example.com/": "not in the host",
		"https://user:pw@example.com/hook":     "--http-headers",
		"ftp://example.com/":                   "http://",
		"http://example.com/{tenant}":          "only {aggregate_type} and {event_type}",
		"http://example.com/a#frag":            "fragment",
		"":                                     "required",
	} {
		c := httpsink.DefaultConfig()
		c.URL = raw
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("url %q: %v, want %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("url %q: the error shows the password: %v", raw, err)
		}
	}
	c := httpsink.DefaultConfig()
	c.URL = "http://example.com/"
	c.Headers = []httpsink.Header{{Name: "Authorization", Source: "Bearer literal"}}
	if err := c.Validate(); err == nil || strings.Contains(err.Error(), "literal") || !strings.Contains(err.Error(), "env:VARIABLE") {
		t.Errorf("a literal header value: %v", err)
	}
}
