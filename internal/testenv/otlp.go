package testenv

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// OTLPReceiver is an OTLP/HTTP trace endpoint on loopback (URL) that keeps the
// spans exported to it.
type OTLPReceiver struct {
	URL      string
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
}

// NewOTLPReceiver starts a receiver that lives until the test ends.
func NewOTLPReceiver(t testing.TB) *OTLPReceiver {
	t.Helper()
	rcv := &OTLPReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(rcv.serve))
	t.Cleanup(srv.Close)
	rcv.URL = srv.URL
	return rcv
}

func (r *OTLPReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	export := &coltracepb.ExportTraceServiceRequest{}
	if err == nil && req.URL.Path == "/v1/traces" {
		err = proto.Unmarshal(body, export)
	}
	if err != nil || req.URL.Path != "/v1/traces" {
		http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range export.ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				r.services = append(r.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// SpanNames returns the names of the spans received, by trace id (hex).
func (r *OTLPReceiver) SpanNames() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]string{}
	for _, s := range r.spans {
		id := hex.EncodeToString(s.TraceId)
		out[id] = append(out[id], s.Name)
	}
	return out
}

// Services returns the service.name of each export's resource.
func (r *OTLPReceiver) Services() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.services...)
}

// Count returns how many spans received have the string attribute key = value,
// by value.
func (r *OTLPReceiver) Count(key string) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, s := range r.spans {
		for _, kv := range s.Attributes {
			if kv.Key == key {
				out[kv.GetValue().GetStringValue()]++
			}
		}
	}
	return out
}
