package deploycheck_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestImage builds the image `make image` builds (scripts/image.sh), in a store of its
// own, and checks what a container runtime would read from it: entrypoint, command,
// user, exposed port, labels. A container cannot run on the CI machines (crun refuses
// cgroups in hybrid mode), so instead of running one the test mounts the image's root
// filesystem and runs the binary found there with --version: it must be static and
// report the version and revision the labels carry.
func TestImage(t *testing.T) {
	buildah := needBuildah(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// A private store (vfs works on any filesystem) keeps the test away from the
	// machine's images and from other runs of itself.
	store := t.TempDir()
	conf := filepath.Join(store, "storage.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "[storage]\ndriver = \"vfs\"\ngraphroot = %q\nrunroot = %q\n",
		filepath.Join(store, "graph"), filepath.Join(store, "run")), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "CONTAINERS_STORAGE_CONF="+conf)
	t.Cleanup(func() {
		// Unmount and remove what buildah holds before TempDir deletes the store.
		cmd := exec.Command(buildah, "rm", "--all")
		cmd.Env = env
		_ = cmd.Run()
	})
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr)
		}
		return string(out)
	}

	const (
		image    = "localhost/walrelay-imagetest:latest"
		version  = "v9.8.7-imagetest"
		revision = "0123456789abcdef0123456789abcdef01234567"
	)
	script := filepath.Join("..", "..", "scripts", "image.sh")
	cmd := exec.CommandContext(ctx, script)
	cmd.Env = append(env, "IMAGE="+image, "VERSION="+version, "REVISION="+revision)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/image.sh: %v\n%s", err, out)
	}

	var inspect struct {
		OCIv1 struct {
			Config struct {
				User         string
				ExposedPorts map[string]struct{}
				Env          []string
				Entrypoint   []string
				Cmd          []string
				Labels       map[string]string
			} `json:"config"`
		}
		Docker struct {
			Config struct {
				User string
			} `json:"config"`
		}
	}
	if err := json.Unmarshal([]byte(run(buildah, "inspect", "--type", "image", image)), &inspect); err != nil {
		t.Fatalf("buildah inspect: %v", err)
	}
	cfg := inspect.OCIv1.Config
	if got := strings.Join(cfg.Entrypoint, " "); got != "/walrelay" {
		t.Errorf("entrypoint %q, want /walrelay", got)
	}
	if got := strings.Join(cfg.Cmd, " "); got != "run" {
		t.Errorf("command %q, want run", got)
	}
	if cfg.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (non-root, as the Kubernetes manifests assume)", cfg.User)
	}
	if _, ok := cfg.ExposedPorts["9731/tcp"]; !ok || len(cfg.ExposedPorts) != 1 {
		t.Errorf("exposed ports %v, want only 9731/tcp (the metrics listener)", cfg.ExposedPorts)
	}
	if !strings.Contains(strings.Join(cfg.Env, "\n"), "WALRELAY_METRICS_ADDR=0.0.0.0:9731") {
		t.Errorf("env %v lacks WALRELAY_METRICS_ADDR=0.0.0.0:9731; the default listens on loopback only", cfg.Env)
	}
	for key, want := range map[string]string{
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": revision,
	} {
		if got := cfg.Labels[key]; got != want {
			t.Errorf("label %s = %q, want %q", key, got, want)
		}
	}

	ctr := strings.TrimSpace(run(buildah, "from", "--pull-never", image))
	root := strings.TrimSpace(run(buildah, "mount", ctr))
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var top []string
	for _, e := range entries {
		top = append(top, e.Name())
	}
	if got := strings.Join(top, " "); got != "etc walrelay" {
		t.Errorf("image root holds %q, want only etc and walrelay (FROM scratch)", got)
	}
	if fi, err := os.Stat(filepath.Join(root, "etc", "ssl", "certs", "ca-certificates.crt")); err != nil || fi.Size() == 0 {
		t.Errorf("no CA bundle at /etc/ssl/certs/ca-certificates.crt (%v); TLS to PostgreSQL and brokers needs it", err)
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if err != nil || !strings.Contains(string(passwd), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd lacks the nonroot user (%v):\n%s", err, passwd)
	}
	// The binary, not the container: a static binary runs the same outside its image.
	got := run(filepath.Join(root, "walrelay"), "--version")
	if !strings.HasPrefix(got, "walrelay "+version+" (revision "+revision) {
		t.Errorf("walrelay --version from the image printed %q, want version %s and revision %s (the labels')", got, version, revision)
	}
	if file, err := exec.LookPath("file"); err == nil {
		if out, _ := exec.Command(file, filepath.Join(root, "walrelay")).Output(); !strings.Contains(string(out), "statically linked") {
			t.Errorf("the image's binary is not statically linked: %s", out)
		}
	}
	run(buildah, "umount", ctr)
	run(buildah, "rm", ctr)
	run(buildah, "rmi", image)
}

// needBuildah finds buildah, which `make setup` installs (Debian's buildah). Without it
// the test is skipped, except under CI, where it must run.
func needBuildah(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("buildah")
	if err != nil {
		msg := fmt.Sprintf("buildah not on PATH (%v); install it: apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y buildah", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg + " (CI is set, so this check may not be skipped)")
		}
		t.Skip(msg)
	}
	return p
}
