package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `make build`'s binary says the commit it was built from, also where GOFLAGS holds
// -buildvcs=false and the toolchain stamps nothing (README, "Install"), and it is
// static, as the image's is: no loader and no C library, whose pages the relay's
// resident set would carry (docs/performance.md, "Memory").
func TestMakeBuild(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set, but this test needs a git checkout and git: %v", err)
		}
		t.Skipf("not a git checkout: %v", err)
	}
	out := filepath.Join(t.TempDir(), "walrelay")
	build := exec.Command("make", "-C", root, "--no-print-directory", "build", "OUT="+out)
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, b)
	}
	got, err := exec.Command(out, "version").Output()
	if err != nil {
		t.Fatalf("walrelay version: %v", err)
	}
	want := "(revision " + strings.TrimSpace(string(head))
	if !strings.Contains(string(got), want) || strings.Contains(string(got), "(devel)") {
		t.Errorf("walrelay version printed %q; want a version and %q)", strings.TrimSpace(string(got)), want)
	}

	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("make build's binary names a program interpreter: it is dynamically linked, want static (CGO_ENABLED=0)")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("make build's binary needs shared libraries %v (%v), want none", libs, err)
	}
}
