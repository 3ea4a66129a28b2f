package relay_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The relay knows brokers only through sink.Sink: a program embedding it with one
// broker links that broker's client and no other. go list shows what relay links.
func TestRelayLinksNoBrokerClient(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/walrelay/walrelay/relay").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/walrelay/walrelay/sink") {
		t.Fatalf("go list -deps gave an implausible list (no sink package):\n%s", out)
	}
	for _, dep := range deps {
		for _, client := range []string{"github.com/twmb/franz-go", "github.com/nats-io/", "github.com/rabbitmq/",
			"github.com/redis/", "github.com/aws/", "cloud.google.com/go/pubsub", "github.com/walrelay/walrelay/sink/"} {
			if strings.HasPrefix(dep, client) {
				t.Errorf("relay depends on %s; build sinks where the program is configured (package sinks)", dep)
			}
		}
	}
}

// Tracing is OpenTelemetry's API in the libraries: relay, outbox and consumer link
// no SDK, exporter or gRPC, so a program that embeds them chooses its own (the
// walrelay binary links the SDK and the OTLP exporters).
func TestLibrariesLinkNoTracingSDK(t *testing.T) {
	t.Parallel()
	for _, pkg := range []string{"relay", "outbox", "consumer"} {
		out, err := exec.Command("go", "list", "-deps", "github.com/walrelay/walrelay/"+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, "go.opentelemetry.io/otel/propagation") {
			t.Fatalf("go list -deps %s gave an implausible list (no otel/propagation):\n%s", pkg, out)
		}
		for _, dep := range deps {
			for _, banned := range []string{"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters/",
				"go.opentelemetry.io/proto/", "google.golang.org/grpc"} {
				if strings.HasPrefix(dep, banned) {
					t.Errorf("%s depends on %s; only cmd/walrelay builds a tracing SDK", pkg, dep)
				}
			}
		}
	}
}

// Cloud authentication reaches the libraries as plain functions (Config's
// DatabasePassword, kafka.Security's AWSCredentials): the AWS SDK that signs RDS IAM
// tokens and reads the AWS environment is the walrelay binary's.
func TestLibrariesLinkNoCloudSDK(t *testing.T) {
	t.Parallel()
	for _, pkg := range []string{"relay", "replication", "catalog", "poller", "migrations", "sink/kafka"} {
		out, err := exec.Command("go", "list", "-deps", "github.com/walrelay/walrelay/"+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, "github.com/jackc/pgx/v5/pgconn") && !slices.Contains(deps, "github.com/twmb/franz-go/pkg/kgo") {
			t.Fatalf("go list -deps %s gave an implausible list (neither pgconn nor kgo):\n%s", pkg, out)
		}
		for _, dep := range deps {
			if strings.HasPrefix(dep, "github.com/aws/") {
				t.Errorf("%s depends on %s; only cmd/walrelay (and sink/sqs) link the AWS SDK", pkg, dep)
			}
		}
	}
}

// The relay runs; admin serves it and ops works beside it. Imports point one way:
// relay links neither, so a program embedding the relay without its listener links
// no HTTP handlers, and neither can reach into the relay's fields. go list shows
// what relay links.
func TestRelayImportsNeitherAdminNorOps(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/walrelay/walrelay/relay").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/walrelay/walrelay/replication") {
		t.Fatalf("go list -deps gave an implausible list (no replication package):\n%s", out)
	}
	for _, dep := range deps {
		if dep == "github.com/walrelay/walrelay/admin" || dep == "github.com/walrelay/walrelay/ops" {
			t.Errorf("relay depends on %s; relay offers what admin and ops need through its methods, and imports neither", dep)
		}
	}
}
