package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestServiceBinaryCarriesNoDemo fails when the walrelay service binary links the demo
// or its test harness: the in-process Kafka broker, and the throwaway-cluster helper,
// which switches to the postgres OS user when run as root. The demo is cmd/walrelay-demo.
func TestServiceBinaryCarriesNoDemo(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(goTool(t), "list", "-deps", "github.com/walrelay/walrelay/cmd/walrelay").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 || !slices.Contains(deps, "github.com/walrelay/walrelay/relay") {
		t.Fatalf("go list -deps gave an implausible list (no relay package):\n%s", out)
	}
	for _, banned := range []string{
		"github.com/twmb/franz-go/pkg/kfake",
		"github.com/walrelay/walrelay/internal/pgcluster",
		"github.com/walrelay/walrelay/internal/demo",
	} {
		if slices.Contains(deps, banned) {
			t.Errorf("the walrelay binary depends on %s; keep it to cmd/walrelay-demo and the tests", banned)
		}
	}
	// The tracing SDK and its exporters are the binary's choice (relay's
	// TestLibrariesLinkNoTracingSDK keeps them out of the libraries).
	for _, tracing := range []string{
		"go.opentelemetry.io/otel/sdk/trace",
		"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp",
		"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc",
	} {
		if !slices.Contains(deps, tracing) {
			t.Errorf("the walrelay binary does not link %s, which its OTEL_* tracing setup needs", tracing)
		}
	}
}

// TestServiceBinaryLinksNoHarness fails when the walrelay service binary links a
// package of the benchmark harness (bench/, a module of its own), of the tests' kit
// (internal/testenv and its servers), or the standard library's testing packages,
// which anything written for tests and benchmarks imports: none of them has work to do
// in the service, and each adds to the binary's size and pages.
func TestServiceBinaryLinksNoHarness(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(goTool(t), "list", "-deps", "github.com/walrelay/walrelay/cmd/walrelay").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 || !slices.Contains(deps, "github.com/walrelay/walrelay/relay") {
		t.Fatalf("go list -deps gave an implausible list (no relay package):\n%s", out)
	}
	for _, dep := range deps {
		for _, harness := range []string{
			"github.com/walrelay/walrelay/bench",
			"github.com/walrelay/walrelay/internal/testenv",
			"testing",
		} {
			if dep == harness || strings.HasPrefix(dep, harness+"/") {
				t.Errorf("the walrelay binary links %s; keep harness and test code out of the packages it imports (go list -deps -f '{{.ImportPath}} {{.Imports}}' ./cmd/walrelay shows which one does)", dep)
			}
		}
	}
}

// goTool finds the go command the way the binary's build does: PATH, then GOROOT.
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	t.Fatal("no go command on PATH and GOROOT unset")
	return ""
}

// TestHelpOffersNoDemo: the demo is a binary of its own, so the service's help must
// not list a demo command (the hidden stub only says where the demo went).
func TestHelpOffersNoDemo(t *testing.T) {
	t.Parallel()
	res := run(t, 10*time.Second, baseEnv(), "--help")
	if res.code != 0 {
		t.Fatalf("exit code %d, want 0\nstderr:\n%s", res.code, res.stderr)
	}
	if strings.Contains(res.stdout, "\n  demo ") {
		t.Errorf("help lists a demo command:\n%s", res.stdout)
	}
}

// TestNothingImportsCmd: the binaries are thin mains over importable packages, so no
// package of the module, nor its tests, imports a command.
func TestNothingImportsCmd(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(goTool(t), "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}",
		"github.com/walrelay/walrelay/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 10 {
		t.Fatalf("go list gave an implausible list:\n%s", out)
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, "github.com/walrelay/walrelay/cmd/") && imp != fields[0] {
				t.Errorf("%s imports %s; move what it needs out of cmd into an importable package", fields[0], imp)
			}
		}
	}
}
