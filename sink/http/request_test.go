package http_test

import (
	"encoding/base64"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
	httpsink "github.com/walrelay/walrelay/sink/http"
)

type received struct {
	method, path string
	header       nethttp.Header
	body         []byte
}

// recorder is a receiver that records every request and answers 204.
func recorder(t *testing.T) (*httptest.Server, func() []received) {
	var mu sync.Mutex
	var got []received
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, received{r.Method, r.URL.Path, r.Header.Clone(), b})
		mu.Unlock()
		w.WriteHeader(nethttp.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []received { mu.Lock(); defer mu.Unlock(); return append([]received(nil), got...) }
}

// One POST per event: the record value as the body, the content type by format,
// record headers under names without underscores, binary values base64 under a
// -Base64 name, NULL headers left out, fixed headers from the environment and a file.
func TestRequestOfAnEvent(t *testing.T) {
	srv, got := recorder(t)
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("Bearer from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WALRELAY_TEST_TENANT_KEY", "k-123")

	text := event("e-text", "order", "o1")
	text.Payload, text.PayloadType = []byte("plain words"), "text"
	bin := event("e-bin", "order", "o2")
	bin.Payload, bin.PayloadType = []byte{0, 1, 2, 0xff}, "bytea"
	tomb := event("e-tomb", "order", "o3")
	tomb.Payload, tomb.NullPayload = nil, true
	hdrs := event("e-hdrs", "order", "o4")
	hdrs.Headers = []outbox.Header{{Key: "tenant_id", Value: "acme"}, {Key: "gone", Null: true},
		{Key: "raw", Value: "caf\xc3\xa9\x00"}}

	cases := []struct {
		name        string
		conv        record.Converter
		ev          *outbox.Event
		contentType string
		body        string
	}{
		{"string over jsonb", record.String, event("e-json", "order", "o0"), "application/json", `{"id":"e-json"}`},
		{"string over text", record.String, text, "text/plain; charset=utf-8", "plain words"},
		{"json over text", record.JSON, text, "application/json", `"plain words"`},
		{"bytearray", record.ByteArray, bin, "application/octet-stream", "\x00\x01\x02\xff"},
		// Confluent's framing: magic byte, id 7, then the union's branch 1 and the
		// string; bytes, so application/octet-stream.
		{"avro", record.Avro, text, "application/octet-stream", "\x00\x00\x00\x00\x07\x02\x16plain words"},
		{"tombstone", record.String, tomb, "application/json", ""},
		{"headers", record.String, hdrs, "application/json", `{"id":"e-hdrs"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config(srv.URL + "/hooks")
			cfg.Format.ValueConverter = tc.conv
			cfg.Format.Schemas = &record.Schemas{Topic: func(*outbox.Event) string { return "t" }}
			cfg.Format.Schemas.Store("t-value", `["null","string"]`, 7)
			cfg.Headers = []httpsink.Header{{Name: "authorization", Source: "file:" + token}, {Name: "X-Tenant-Key", Source: "env:WALRELAY_TEST_TENANT_KEY"}}
			s := newSink(t, cfg)
			o := newOutcomes()
			before := len(got())
			s.Publish(tc.ev, o.done(tc.ev.ID))
			if err := o.wait(t, tc.ev.ID); err != nil {
				t.Fatal(err)
			}
			all := got()
			if len(all) != before+1 {
				t.Fatalf("%d requests, want 1", len(all)-before)
			}
			r := all[len(all)-1]
			if r.method != "POST" || r.path != "/hooks" {
				t.Errorf("request %s %s, want POST /hooks", r.method, r.path)
			}
			if string(r.body) != tc.body {
				t.Errorf("body %q, want %q", r.body, tc.body)
			}
			if ct := r.header.Get("Content-Type"); ct != tc.contentType {
				t.Errorf("content type %q, want %q", ct, tc.contentType)
			}
			want := map[string]string{"Id": tc.ev.ID, "Event-Type": "order.changed", "Aggregate-Type": "order",
				"Aggregate-Id": tc.ev.AggregateID, "Created-At": "2026-01-02T03:04:05.000000006Z",
				"Authorization": "Bearer from-file", "X-Tenant-Key": "k-123", "Webhook-Id": tc.ev.ID}
			if tc.ev == tomb {
				want["Tombstone"] = "true"
			}
			if tc.ev == hdrs {
				want["Tenant-Id"] = "acme"
				want["Raw-Base64"] = base64.StdEncoding.EncodeToString([]byte("caf\xc3\xa9\x00"))
			}
			for k, v := range want {
				if g := r.header.Values(k); len(g) != 1 || g[0] != v {
					t.Errorf("header %s = %q, want %q", k, g, v)
				}
			}
			for k := range r.header {
				if k == "Gone" || k == "Raw" || k == "Webhook-Signature" {
					t.Errorf("header %s sent: %q", k, r.header.Values(k))
				}
				for _, c := range k {
					if c == '_' {
						t.Errorf("header name %q has an underscore", k)
					}
				}
			}
			if tc.ev != tomb && r.header.Get("Tombstone") != "" {
				t.Errorf("Tombstone header on a value")
			}
		})
	}
}

// A column header that maps onto a header the sink sets is refused with the event,
// and names the fix.
func TestHeaderTakingAReservedNameIsRefused(t *testing.T) {
	srv, got := recorder(t)
	t.Setenv("WALRELAY_TEST_TOKEN", "Bearer x")
	cfg := config(srv.URL)
	cfg.Headers = []httpsink.Header{{Name: "Authorization", Source: "env:WALRELAY_TEST_TOKEN"}}
	s := newSink(t, cfg)
	o := newOutcomes()
	for _, key := range []string{"content_type", "authorization"} {
		ev := event("e-"+key, "order", key)
		ev.Headers = []outbox.Header{{Key: key, Value: "v"}}
		s.Publish(ev, o.done(ev.ID))
		err := o.wait(t, ev.ID)
		if !isFinal(err) {
			t.Fatalf("header %s: %v, want a final event error", key, err)
		}
	}
	if n := len(got()); n != 0 {
		t.Fatalf("%d requests sent for refused events", n)
	}
}
