// Package startpages gives back the executable's pages that only start-up touched.
//
// Why: every linked package's init runs whether or not its part is used, so the
// cloud SDKs' tables, protobuf descriptors and endpoint lists of sinks a relay does
// not use are read once at start and stay in its resident set: about 29 MiB of a
// 63 MiB drain peak (docs/performance.md, "Memory"). The executable's read-only
// mappings (text and read-only data) are backed by the file, so the kernel can drop
// them from the process and fault the ones still used back in from the page cache,
// without reading the disk. What the relay's loop touches comes back within its
// first events; the rest stays out.
package startpages

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// span is one mapping of the executable that may be given back.
type span struct {
	start, end uintptr
}

// releasable reads /proc/PID/smaps text and returns the mappings of the file exe
// that may be dropped: mapped from exe, neither writable nor shared, and holding no
// anonymous page. A read-only mapping with anonymous pages was written once (the
// relocations of a position-independent build, a debugger's breakpoints); dropping
// it would bring back the file's bytes in place of the written ones, so it stays.
func releasable(smaps io.Reader, exe string) ([]span, error) {
	var spans []span
	var cur *span
	anon := false
	flush := func() {
		if cur != nil && !anon {
			spans = append(spans, *cur)
		}
		cur, anon = nil, false
	}
	sc := bufio.NewScanner(smaps)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if s, ok := header(fields); ok {
			flush()
			if len(fields) >= 6 && strings.Join(fields[5:], " ") == exe && fields[1][1] != 'w' && fields[1][3] == 'p' {
				cur = &s
			}
			continue
		}
		if cur != nil && fields[0] == "Anonymous:" && len(fields) >= 2 && fields[1] != "0" {
			anon = true
		}
	}
	flush()
	return spans, sc.Err()
}

// header parses a mapping's first line ("start-end perms offset dev inode path").
func header(fields []string) (span, bool) {
	if len(fields) < 5 || len(fields[1]) != 4 {
		return span{}, false
	}
	lo, hi, ok := strings.Cut(fields[0], "-")
	if !ok {
		return span{}, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return span{}, false
	}
	return span{start: uintptr(start), end: uintptr(end)}, true
}
