package debezium_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The importer turns text into text (and reads a catalog): it links no relay, no
// settings, no HTTP side of the relay (admin, ops) and nothing of the binary (its
// tracing SDK, its cloud authentication, cmd).
func TestDebeziumLinksNoRelayOrBinary(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/walrelay/walrelay/debezium").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/walrelay/walrelay/record") {
		t.Fatalf("go list -deps gave an implausible list (no record package):\n%s", out)
	}
	for _, dep := range deps {
		for _, banned := range []string{"github.com/walrelay/walrelay/relay", "github.com/walrelay/walrelay/settings",
			"github.com/walrelay/walrelay/admin", "github.com/walrelay/walrelay/ops", "github.com/walrelay/walrelay/cmd",
			"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "github.com/aws/"} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				t.Errorf("debezium depends on %s; the importer converts text, the relay runs and serves, the binary traces and signs", dep)
			}
		}
	}
}
