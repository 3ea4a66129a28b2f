package pgcluster

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// logName is the server's stdout and stderr, in the cluster directory.
const logName = "postgres.log"

// errorTailLines is how many log lines an error carries.
const errorTailLines = 20

// maxTailBytes bounds how much of a log LogTail reads.
const maxTailBytes = 256 << 10

// LogTail returns the last n lines of the server log, for test failure
// messages. It returns "" when there is no log yet.
func (c *Cluster) LogTail(n int) string {
	text, _ := readFrom(c.logPath(), -1)
	return tailLines(text, n)
}

// readFrom reads path from offset, or its last maxTailBytes when offset < 0.
func readFrom(path string, offset int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if offset < 0 {
		fi, err := f.Stat()
		if err != nil {
			return "", err
		}
		offset = max(fi.Size()-maxTailBytes, 0)
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(f, 16<<20))
	return string(b), err
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func tailLines(text string, n int) string {
	if n <= 0 {
		return ""
	}
	text = strings.TrimRight(text, "\n")
	if text == "" {
		return ""
	}
	lines := strings.Split(text, "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// withOutput appends the tail of some process output to err, keeping err
// in the chain.
func withOutput(err error, what, text string) error {
	tail := tailLines(text, errorTailLines)
	if tail == "" {
		return fmt.Errorf("%w (%s is empty)", err, what)
	}
	return fmt.Errorf("%w; last lines of %s:\n%s", err, what, tail)
}
