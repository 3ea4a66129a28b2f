package decoder_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/outbox"
)

var updateCorpus = flag.Bool("update", false, "rewrite the seed corpus in testdata/fuzz/FuzzDecode")

// FuzzDecode feeds arbitrary bytes to a decoder that has the outbox relation
// cached. It must never panic, every error must be one of the package's
// typed errors, and an event must not alias the input. The input is decoded
// twice, so a fuzzed Relation message also exercises the cache it left.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		d := decoder.New("public", "outbox_events", outbox.DefaultColumns())
		var m decoder.Message
		if err := d.Decode(outboxRelation(defaultCols), &m); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			in := bytes.Clone(data)
			err := d.Decode(in, &m)
			if err != nil {
				var (
					de *decoder.DecodeError
					se *decoder.SchemaError
					re *decoder.RowError
				)
				if !errors.As(err, &de) && !errors.As(err, &se) && !errors.As(err, &re) {
					t.Fatalf("untyped error %T: %v", err, err)
				}
				if m.Kind != decoder.KindSkip {
					t.Fatalf("error %v with kind %v", err, m.Kind)
				}
				_ = err.Error()
				continue
			}
			if m.Kind > decoder.KindRelation {
				t.Fatalf("kind %v out of range", m.Kind)
			}
			if m.Kind != decoder.KindInsert {
				continue
			}
			want := outbox.Event{
				ID: string([]byte(m.Event.ID)), AggregateType: string([]byte(m.Event.AggregateType)),
				AggregateID: string([]byte(m.Event.AggregateID)), EventType: string([]byte(m.Event.EventType)),
				Payload: bytes.Clone(m.Event.Payload), CreatedAt: m.Event.CreatedAt,
			}
			for i := range in {
				in[i] ^= 0xff
			}
			if diff := diffEvent(m.Event, want); diff != "" {
				t.Fatalf("event aliases input: %s", diff)
			}
		}
	})
}

// fuzzSeeds are the committed seed corpus: a few valid messages of each kind
// and some near misses.
func fuzzSeeds() map[string][]byte {
	ts := time.Date(2026, 11, 29, 19, 31, 48, 123456000, time.UTC)
	return map[string][]byte{
		"begin":                   beginMsg(0x16B3748, ts, 771),
		"commit":                  commitMsg(0, 0x16B3748, 0x16B3778, ts),
		"relation-outbox":         outboxRelation(defaultCols),
		"relation-reordered":      outboxRelation(reordered),
		"relation-missing-column": outboxRelation(defaultCols[:5]),
		"relation-other":          relationMsg(otherOID, "public", "orders", []relCol{{name: "id", typ: oidInt8, typmod: -1}}),
		"insert":                  insertMsg(outboxOID, goodRow().vals(defaultCols)),
		"insert-offset":           insertMsg(outboxOID, goodRow().with("created_at", text("2026-11-30 01:01:48.5+05:30")).vals(defaultCols)),
		"insert-binary":           insertMsg(outboxOID, goodRow().with("payload", binval("\x01{}")).vals(defaultCols)),
		"insert-null":             insertMsg(outboxOID, goodRow().with("aggregate_id", null).vals(defaultCols)),
		"insert-toast":            insertMsg(outboxOID, goodRow().with("payload", toast).vals(defaultCols)),
		"insert-infinity":         insertMsg(outboxOID, goodRow().with("created_at", text("infinity")).vals(defaultCols)),
		"insert-bc":               insertMsg(outboxOID, goodRow().with("created_at", text("0044-03-15 12:00:00-00:53:28 BC")).vals(defaultCols)),
		"insert-undescribed":      insertMsg(otherOID, []val{text("1")}),
		"update":                  updateMsg(outboxOID, 'K', []val{text(testID)}, goodRow().vals(defaultCols)),
		"delete":                  deleteMsg(outboxOID, 'O', goodRow().vals(defaultCols)),
		"truncate":                truncateMsg(0, outboxOID),
		"type":                    typeMsg(70000, "public", "mood"),
		"origin":                  originMsg(0x16B3748, "node"),
		"message":                 logicalMsg(true, 0x16B3748, "walrelay", []byte("hello")),
		"stream-start":            streamStartMsg(771, true),
		"stream-commit":           streamCommitMsg(771, 1, 2, ts),
		"empty":                   {},
	}
}

// TestFuzzSeedCorpus keeps testdata/fuzz/FuzzDecode in step with the
// encoder; run with -update to rewrite it.
func TestFuzzSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	for name, data := range fuzzSeeds() {
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		path := filepath.Join(dir, "seed-"+name)
		if *updateCorpus {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("read seed: %v (run go test ./decoder -run TestFuzzSeedCorpus -update)", err)
			continue
		}
		if string(got) != want {
			t.Errorf("%s is stale; run go test ./decoder -run TestFuzzSeedCorpus -update", path)
		}
	}
}
