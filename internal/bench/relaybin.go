package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// The harness runs whatever walrelay binary it is given (-walrelay: an older or newer
// commit), so it asks the binary what it accepts instead of assuming this commit's
// flags: the default --on-publish, and whether a mode and on-publish pair is valid.

var onPublishDefault = regexp.MustCompile(`--on-publish string .*\(default "([^"]+)"\)`)

// defaultOnPublish reads the binary's default --on-publish from `walrelay run --help`.
func defaultOnPublish(ctx context.Context, bin string) (string, error) {
	out, err := exec.CommandContext(ctx, bin, "run", "--help").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s run --help: %w: %s", bin, err, out)
	}
	m := onPublishDefault.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%s run --help does not name a default --on-publish", bin)
	}
	return string(m[1]), nil
}

// relayAccepts reports whether the binary accepts --mode mode --on-publish onPublish
// and, when it does not, the reason it gives. The relay checks its settings before it
// connects anywhere and exits with status 2 when they are invalid, so a run against
// an address nothing listens on tells valid from invalid within a moment; a binary
// still running (retrying the connection) after two seconds accepted them.
func relayAccepts(ctx context.Context, bin, mode, onPublish string, extra []string) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	args := append([]string{"run"}, extra...)
	args = append(args, "--mode", mode, "--on-publish", onPublish,
		"--database-url", "postgres://bench@127.0.0.1:1/none?connect_timeout=1", "--kafka-brokers", "127.0.0.1:1")
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 2 {
		line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		return false, strings.TrimPrefix(line, "walrelay: ")
	}
	return true, ""
}
