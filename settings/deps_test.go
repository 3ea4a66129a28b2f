package settings_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Settings only read configuration: they build relay.Config, sinks.Config and the
// listener's admin.Options, so an embedding program that reads walrelay's settings
// links nothing of the binary (its tracing SDK, the RDS IAM signer of cloud
// authentication, cmd).
func TestSettingsLinkNoBinary(t *testing.T) {
	t.Parallel()
	checkDeps(t, "settings", "github.com/walrelay/walrelay/relay")
}

// checkDeps fails when pkg depends on what only the binary links; want is a dependency it must have, so a list go list got wrong fails.
func checkDeps(t *testing.T, pkg, want string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "github.com/walrelay/walrelay/"+pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, want) {
		t.Fatalf("go list -deps %s gave an implausible list (no %s):\n%s", pkg, want, out)
	}
	for _, dep := range deps {
		for _, banned := range []string{"github.com/walrelay/walrelay/cmd", "go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters/",
			"github.com/aws/aws-sdk-go-v2/feature/rds/auth"} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				t.Errorf("%s depends on %s; tracing and cloud authentication are the binary's", pkg, dep)
			}
		}
	}
}
