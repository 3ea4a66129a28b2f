package startpages

import (
	"strings"
	"testing"
)

const smapsFixture = `00400000-0188d000 r-xp 00000000 fd:01 123 /opt/walrelay
Size:              21044 kB
Rss:               14000 kB
Anonymous:             0 kB
0188d000-02f7e000 r--p 0148d000 fd:01 123 /opt/walrelay
Size:              23492 kB
Anonymous:             0 kB
02f7e000-03044000 rw-p 02b7e000 fd:01 123 /opt/walrelay
Size:                792 kB
Anonymous:           600 kB
03044000-03100000 r--p 02c44000 fd:01 123 /opt/walrelay
Size:                752 kB
Anonymous:             8 kB
03100000-03200000 r--s 00000000 fd:01 123 /opt/walrelay
Anonymous:             0 kB
7f0000000000-7f0000100000 r-xp 00000000 fd:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:             0 kB
7f0000200000-7f0000300000 rw-p 00000000 00:00 0
Anonymous:          1024 kB
7f0000400000-7f0000500000 r--p 00000000 fd:01 789 /opt/walrelay old
Anonymous:             0 kB
`

// TestReleasableTakesOnlyUnwrittenReadOnlyMappingsOfTheExecutable: text and read-only
// data go; the data segment, a read-only mapping holding written (anonymous) pages,
// a shared mapping, libraries, the heap and another file do not.
func TestReleasableTakesOnlyUnwrittenReadOnlyMappingsOfTheExecutable(t *testing.T) {
	got, err := releasable(strings.NewReader(smapsFixture), "/opt/walrelay")
	if err != nil {
		t.Fatal(err)
	}
	want := []span{{0x400000, 0x188d000}, {0x188d000, 0x2f7e000}}
	if len(got) != len(want) {
		t.Fatalf("releasable = %#v, want %#v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("releasable = %#v, want %#v", got, want)
		}
	}
}

// TestReleasableNamesAPathWithSpaces: a path is the rest of the line, so an
// executable whose path has a space is still found.
func TestReleasableNamesAPathWithSpaces(t *testing.T) {
	got, err := releasable(strings.NewReader(smapsFixture), "/opt/walrelay old")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != (span{0x7f0000400000, 0x7f0000500000}) {
		t.Fatalf("releasable = %#v, want the one mapping of %q", got, "/opt/walrelay old")
	}
}
