package startpages

import (
	"bufio"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// exeRSS is the resident kilobytes of the test binary's own mappings.
func exeRSS(t *testing.T) int64 {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var kb int64
	inExe := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if _, ok := header(fields); ok {
			inExe = len(fields) >= 6 && strings.Join(fields[5:], " ") == exe && fields[1][1] != 'w'
			continue
		}
		if inExe && fields[0] == "Rss:" {
			n, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			kb += n
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return kb
}

// TestReleaseDropsTheExecutablesPagesAndTheProcessGoesOn: after Release the test
// binary's read-only mappings hold fewer resident pages than before, and code and
// data the process used before (sorting, formatting) still work: the dropped pages
// come back from the file.
func TestReleaseDropsTheExecutablesPagesAndTheProcessGoesOn(t *testing.T) {
	before := exeRSS(t)
	n, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	after := exeRSS(t)
	if n == 0 {
		t.Fatal("Release advised no mapping of the executable")
	}
	if after >= before {
		t.Fatalf("the executable's resident read-only pages: %d kB before Release, %d kB after", before, after)
	}
	xs := []int{3, 1, 2}
	sort.Ints(xs)
	if got := strconv.Itoa(xs[0]) + strconv.Itoa(xs[2]); got != "13" {
		t.Fatalf("after Release: %q, want 13", got)
	}
	t.Logf("advised %d MiB; resident read-only pages of the executable %d kB before, %d kB after", n>>20, before, after)
}
