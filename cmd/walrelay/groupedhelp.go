package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/walrelay/walrelay/settings"
)

// groupedHelp has cmd's help list its flags by concern (settings.Groups) rather than
// in one alphabetical list of about ninety.
func groupedHelp(cmd *cobra.Command) {
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		w := c.OutOrStderr()
		fmt.Fprintf(w, "Usage:\n  %s\n", c.UseLine())
		listed := map[string]bool{}
		section := func(title string, in func(string) bool) {
			fs := pflag.NewFlagSet(title, pflag.ContinueOnError)
			c.Flags().VisitAll(func(f *pflag.Flag) {
				if !listed[f.Name] && in(f.Name) {
					fs.AddFlag(f)
					listed[f.Name] = true
				}
			})
			if fs.HasFlags() {
				fmt.Fprintf(w, "\n%s:\n%s", title, fs.FlagUsages())
			}
		}
		for _, g := range settings.Groups {
			section(g.Title, g.Has)
		}
		section("Other", func(string) bool { return true })
		return nil
	})
}

// replaySettings are the settings replay reads: where the rows are and how they
// become records, the sink and its window, and how to reach the relay about a pause.
// The stream's own (slot, publication, intervals, delivery) it has no use for.
func replaySettings(s *settings.Settings) []string {
	uses := map[string]bool{"mode": true, "on-publish": true, "max-inflight-events": true, "max-inflight-bytes": true,
		"ack-timeout": true, "poll-batch-size": true, "poll-workers": true, "retention": true,
		"metrics-addr": true, "admin-url": true, "admin-token": true, "log-level": true, "log-format": true}
	skip := map[string]bool{"slot": true, "slot-failover": true, "publication": true}
	names := []string{"admin-url"}
	for _, name := range s.DefaultNames() {
		switch settings.GroupOf(name) {
		case "Stream", "Retries, dead letters and polling", "Operations":
			if uses[name] {
				names = append(names, name)
			}
		default:
			if !skip[name] {
				names = append(names, name)
			}
		}
	}
	return names
}
