package main

import (
	"slices"
	"testing"
)

func TestParseModes(t *testing.T) {
	got, err := parseModes("mark, delete,none,progress,poll:mark,mark")
	if err != nil {
		t.Fatal(err)
	}
	want := []modeSpec{{"stream", "mark"}, {"stream", "delete"}, {"stream", "none"}, {"stream", "progress"}, {"poll", "mark"}}
	if !slices.Equal(got, want) {
		t.Errorf("parseModes = %v, want %v (duplicates dropped)", got, want)
	}
	for _, bad := range []string{"", " , ", "batch:mark", "poll:"} {
		if _, err := parseModes(bad); err == nil {
			t.Errorf("parseModes(%q) accepted it, want an error", bad)
		}
	}
}

func TestOnPublishFromHelp(t *testing.T) {
	for _, c := range []struct{ help, want string }{
		{`      --mode string        stream or poll; env WALRELAY_MODE (default "stream")
      --on-publish string  after an ack: mark (set processed_at), delete, or none; env WALRELAY_ON_PUBLISH (default "mark")
      --poll-batch-size string  rows per poll; env WALRELAY_POLL_BATCH_SIZE (default "100")`, "mark"},
		{`      --on-publish string  after an ack: progress (...; stream mode), mark, delete, or none; empty: progress in stream mode, mark in poll mode; env WALRELAY_ON_PUBLISH
      --poll-batch-size string  rows per poll; env WALRELAY_POLL_BATCH_SIZE (default "100")`, "progress"},
		{`      --on-publish string  after an ack; env WALRELAY_ON_PUBLISH
      --poll-batch-size string  rows per poll (default "100")`, ""},
	} {
		if got := onPublishFromHelp(c.help); got != c.want {
			t.Errorf("onPublishFromHelp = %q, want %q in:\n%s", got, c.want, c.help)
		}
	}
}

func TestRemoves(t *testing.T) {
	for _, c := range []struct {
		onPublish string
		args      []string
		want      bool
	}{
		{"mark", nil, false},
		{"none", nil, false},
		{"delete", nil, true},
		{"progress", nil, true},
		{"mark", []string{"--retention", "1s"}, true},
		{"mark", []string{"--retention=1s"}, true},
	} {
		if got := removes(c.onPublish, c.args); got != c.want {
			t.Errorf("removes(%q, %v) = %v, want %v", c.onPublish, c.args, got, c.want)
		}
	}
}
