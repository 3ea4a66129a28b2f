package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
)

// clearOTELEnv unsets every variable tracerProvider reads, for the test.
func clearOTELEnv(t *testing.T) {
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"} {
		t.Setenv(k, "")
	}
}

// No endpoint, or tracing disabled: no provider, so the relay traces nothing.
func TestTracerProviderOffWithoutEndpoint(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	for _, env := range [][]string{
		nil,
		{"OTEL_SDK_DISABLED", "true", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"},
		{"OTEL_TRACES_EXPORTER", "none", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces"},
	} {
		clearOTELEnv(t)
		for i := 0; i < len(env); i += 2 {
			t.Setenv(env[i], env[i+1])
		}
		tp, err := tracerProvider(context.Background(), logger)
		if err != nil || tp != nil {
			t.Errorf("env %v: provider %v, error %v; want none and no error", env, tp, err)
		}
	}
}

// A protocol or exporter walrelay does not have is a configuration error naming
// the variable.
func TestTracerProviderRejectsUnknownSettings(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	for _, env := range [][]string{
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
		{"OTEL_TRACES_EXPORTER", "zipkin"},
	} {
		clearOTELEnv(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
		t.Setenv(env[0], env[1])
		tp, err := tracerProvider(context.Background(), logger)
		if err == nil || !strings.Contains(err.Error(), env[0]) {
			t.Errorf("%s=%s: provider %v, error %v; want an error naming %s", env[0], env[1], tp, err, env[0])
		}
	}
}

// With an endpoint set, the provider exports over OTLP/HTTP: a span arrives at a
// local receiver, under service.name walrelay, flushed by shutdownTracing. The
// grpc protocol builds a provider too.
func TestTracerProviderExportsToEndpoint(t *testing.T) {
	rcv := testenv.NewOTLPReceiver(t)
	logger := slog.New(slog.DiscardHandler)
	clearOTELEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	tp, err := tracerProvider(context.Background(), logger)
	if err != nil || tp == nil {
		t.Fatalf("provider %v, error %v; want a provider", tp, err)
	}
	_, span := tp.Tracer("test").Start(context.Background(), "publish order")
	traceID := span.SpanContext().TraceID().String()
	span.End()
	shutdownTracing(tp, logger)
	// Shutdown returned after the export's response: the span is there.
	if got := rcv.SpanNames()[traceID]; len(got) != 1 || got[0] != "publish order" {
		t.Errorf("received spans %v for trace %s, want [publish order]", got, traceID)
	}
	if got := rcv.Services(); len(got) != 1 || got[0] != "walrelay" {
		t.Errorf("service.name %v, want walrelay", got)
	}

	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
	tp, err = tracerProvider(context.Background(), logger)
	if err != nil || tp == nil {
		t.Fatalf("grpc: provider %v, error %v; want a provider", tp, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = tp.Shutdown(ctx) // nothing to export, nothing listens
}
