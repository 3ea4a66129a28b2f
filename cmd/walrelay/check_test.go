package main_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// `walrelay run --check` checks the configuration, a single relay's or a
// databases list's, and exits 0 without connecting to anything: the database and
// the broker it names are a listener that counts connections, and counts none. A
// bad setting exits 2 naming it, and every bad entry of a list is named at once.
func TestRunCheck(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	dbURL := "postgres://walrelay:secret@" + addr + "/app"
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	list := file("list.yaml", "kafka-brokers: "+addr+"\ndatabases:\n"+
		"  - name: orders\n    database-url: "+dbURL+"\n    slot: orders\n"+
		"  - name: billing\n    database-url: "+dbURL+"\n    slot: billing\n")
	badList := file("bad.yaml", "kafka-brokers: "+addr+"\ndatabases:\n"+
		"  - name: orders\n    database-url: "+dbURL+"\n    slot: orders\n    ack-timeout: 1ms\n"+
		"  - name: billing\n    slot: billing\n")

	for _, c := range []struct {
		name     string
		env      []string
		args     []string
		code     int
		want     string
		wantDiag []string
	}{
		{"single", relayEnv(dbURL, []string{addr}), nil, 0, "configuration valid: slot walrelay, sink kafka\n", nil},
		{"list", baseEnv("WALRELAY_CONFIG=" + list), nil, 0, "configuration valid: databases orders, billing\n", nil},
		{"one of the list", baseEnv("WALRELAY_CONFIG=" + list), []string{"--database", "billing"}, 0, "configuration valid: databases billing\n", nil},
		{"no such database", baseEnv("WALRELAY_CONFIG=" + list), []string{"--database", "shipping"}, 2, "",
			[]string{"--database shipping: no such database", "orders, billing"}},
		{"bad setting", relayEnv(dbURL, []string{addr}), []string{"--ack-timeout", "-5s"}, 2, "",
			[]string{"ack timeout must be 0 (not watched) or at least 100ms, got -5s"}},
		{"no database url", baseEnv("WALRELAY_KAFKA_BROKERS=" + addr), nil, 2, "",
			[]string{"database url is required"}},
		{"bad entries", baseEnv("WALRELAY_CONFIG=" + badList), nil, 2, "",
			[]string{"(orders)", "ack timeout must be 0 (not watched) or at least 100ms, got 1ms", "(billing)", "database url is required"}},
	} {
		res := run(t, 30*time.Second, c.env, append([]string{"run", "--check"}, c.args...)...)
		if res.code != c.code || res.stdout != c.want {
			t.Errorf("%s: exit %d, stdout %q; want %d, %q\nstderr:\n%s", c.name, res.code, res.stdout, c.code, c.want, res.stderr)
		}
		for _, w := range c.wantDiag {
			if !strings.Contains(res.stderr, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", c.name, w, res.stderr)
			}
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("run --check opened %d connections to the database or broker address, want none", n)
	}
}
