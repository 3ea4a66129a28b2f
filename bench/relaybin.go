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

// The --on-publish line of `walrelay run --help` names the default either as pflag
// does, (default "mark"), or in words when the default depends on --mode ("empty:
// progress in stream mode, ...").
var onPublishDefaults = []*regexp.Regexp{
	regexp.MustCompile(`\(default "([^"]+)"\)`),
	regexp.MustCompile(`empty: ([a-z-]+) in stream mode`),
}

// defaultOnPublish reads the binary's default --on-publish in stream mode from
// `walrelay run --help`; "" when the help does not say.
func defaultOnPublish(ctx context.Context, bin string) (string, error) {
	out, err := exec.CommandContext(ctx, bin, "run", "--help").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s run --help: %w: %s", bin, err, out)
	}
	return onPublishFromHelp(string(out)), nil
}

func onPublishFromHelp(help string) string {
	for _, line := range strings.Split(help, "\n") {
		if !strings.Contains(line, "--on-publish string") {
			continue
		}
		for _, re := range onPublishDefaults {
			if m := re.FindStringSubmatch(line); m != nil {
				return m[1]
			}
		}
	}
	return ""
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
