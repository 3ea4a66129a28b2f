package redis

import (
	"context"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/walrelay/walrelay/internal/testenv/brokers"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want class
	}{
		// No answer from Redis: send again.
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, retry},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, retry},
		{"eof", io.EOF, retry},
		{"unexpected eof", fmt.Errorf("read reply: %w", io.ErrUnexpectedEOF), retry},
		{"read timeout", &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, retry},
		{"deadline", context.DeadlineExceeded, retry},
		{"pool timeout", goredis.ErrPoolTimeout, retry},
		// The server's state right now: send again.
		{"loading", replyError("LOADING Redis is loading the dataset in memory"), retry},
		{"readonly replica", replyError("READONLY You can't write against a read only replica."), retry},
		{"master down", replyError("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), retry},
		{"cluster down", replyError("CLUSTERDOWN The cluster is down"), retry},
		{"try again", replyError("TRYAGAIN Multiple keys request during rehashing of slot"), retry},
		{"out of memory", replyError("OOM command not allowed when used memory > 'maxmemory'."), retry},
		{"busy script", replyError("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT."), retry},
		{"no replicas", replyError("NOREPLICAS Not enough good replicas to write."), retry},
		{"max clients", replyError("ERR max number of clients reached"), retry},
		{"noscript", goredis.ErrNoScript, retry},
		{"wrapped loading", fmt.Errorf("append: %w", replyError("LOADING Redis is loading")), retry},
		// Refusals that will repeat.
		{"wrong type", replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), reject},
		{"no permission", replyError("NOPERM No permissions to access a key"), reject},
		{"wrong password", replyError("WRONGPASS invalid username-password pair or user is disabled."), reject},
		{"bad argument", replyError("ERR The ID specified in XADD is equal or smaller than the target stream top item"), reject},
		{"unknown command", replyError("ERR unknown command 'EVALSHA', with args beginning with: "), reject},
		{"script error", replyError("ERR user_script:1: Script attempted to access nonexistent global variable 'x'"), reject},
		{"moved", replyError("MOVED 3999 127.0.0.1:6381"), reject},
		{"code only as a prefix", replyError("OOMPH not a transient code"), reject},
		{"unexpected reply", fmt.Errorf("%w string", errUnexpectedReply), reject},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.err); got != tc.want {
				t.Errorf("classify(%v) = %s, want %s", tc.err, got, tc.want)
			}
		})
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }

// Error replies as go-redis parses them (typed errors for LOADING, OOM, NOPERM, ...)
// classify like the same codes caught by the script.
func TestClassifyParsedReplies(t *testing.T) {
	url := brokers.Redis(t) // brokers, not testenv: testenv imports this package
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	client := goredis.NewClient(opts)
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		t.Fatalf("no Redis at %s: %v", url, err)
	}
	for _, reply := range []string{
		"LOADING Redis is loading the dataset in memory", "READONLY You can't write against a read only replica.",
		"MASTERDOWN Link with MASTER is down", "CLUSTERDOWN The cluster is down", "TRYAGAIN Multiple keys",
		"OOM command not allowed when used memory > 'maxmemory'.", "NOREPLICAS Not enough good replicas to write.",
		"ERR max number of clients reached", "NOPERM No permissions to access a key", "WRONGTYPE Operation against a key",
		"WRONGPASS invalid username-password pair", "MOVED 3999 127.0.0.1:6381", "ERR anything else",
	} {
		err := client.Eval(ctx, "return redis.error_reply(ARGV[1])", nil, reply).Err()
		if err == nil || err.Error() != reply {
			t.Fatalf("eval error_reply(%q): %v", reply, err)
		}
		if got, want := classify(err), classify(replyError(reply)); got != want {
			t.Errorf("%q parsed by go-redis (%T): %s, caught by the script: %s", reply, err, got, want)
		}
	}
}
