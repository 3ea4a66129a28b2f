package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// tracingShutdownTimeout bounds the export of the spans still queued at exit.
const tracingShutdownTimeout = 5 * time.Second

// tracerProvider builds the OpenTelemetry SDK provider the standard OTEL_*
// environment asks for, exporting over OTLP with a batch span processor, or nil
// when it asks for none: no OTEL_EXPORTER_OTLP_TRACES_ENDPOINT nor
// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none.
// The exporter, the batch processor and the sampler read the rest of their
// OTEL_* variables themselves (headers, timeout, certificates, OTEL_BSP_*,
// OTEL_TRACES_SAMPLER); service.name defaults to walrelay.
func tracerProvider(ctx context.Context, logger *slog.Logger) (*sdktrace.TracerProvider, error) {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	switch exp := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return nil, nil
	case "", "otlp":
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%s: walrelay exports traces over OTLP only; set it to otlp (or none), "+
			"or unset it", exp)
	}
	if os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		return nil, nil
	}
	protocol := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exporter sdktrace.SpanExporter
	var err error
	switch protocol {
	case "", "http/protobuf":
		exporter, err = otlptracehttp.New(ctx)
	case "grpc":
		exporter, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%s: walrelay exports traces with http/protobuf (the default) or grpc", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("build the OTLP trace exporter from the OTEL_EXPORTER_OTLP_* variables: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "walrelay")),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("read OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	// Export failures are the collector's problem, not the relay's: log them.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("tracing: export failed; spans are dropped, events are not", "err", err)
	}))
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res)), nil
}

// shutdownTracing flushes the spans still queued, for at most
// tracingShutdownTimeout.
func shutdownTracing(tp *sdktrace.TracerProvider, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		logger.Warn("tracing: shutdown did not export every span", "err", err)
	}
}
