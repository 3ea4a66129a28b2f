package relay

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A large transaction holds the confirmable LSN at its start while its events flow:
// the backlog's line then counts the WAL read, with what is relayed beside it, so it
// never says 0 percent with thousands of events done.
func TestBacklogLineCountsTheWALRead(t *testing.T) {
	var logs bytes.Buffer
	began := time.Now()
	b := &backlog{from: 1000, to: 11000, events: 244_000, log: &progressLog{
		log:  slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: dropTime})),
		msg:  "relaying the WAL written before the start",
		unit: "read_wal_bytes", total: 10000, every: time.Second, began: began, last: began,
	}}
	if b.at(began.Add(2*time.Second), 1000, 6000) {
		t.Fatal("the backlog counts as relayed while the confirmable LSN is at its start")
	}
	line := logs.String()
	for _, want := range []string{"read_wal_bytes=5000 ", "read_wal_bytes_total=10000 ", "percent=50 ",
		"eta=2s ", "relayed_wal_bytes=0 ", "events=244000 "} {
		if !strings.Contains(line, want) {
			t.Errorf("the progress line lacks %q:\n%s", want, line)
		}
	}
	logs.Reset()
	if !b.at(began.Add(3*time.Second), 11000, 11000) {
		t.Fatal("the backlog is not relayed once the confirmable LSN reached its end")
	}
	if !strings.Contains(logs.String(), `msg="caught up with the WAL written before the start" read_wal_bytes=10000 `) {
		t.Errorf("no last line once relayed:\n%s", logs.String())
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
