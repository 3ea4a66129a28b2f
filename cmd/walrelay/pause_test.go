package main_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
)

// `walrelay pause` and `resume` drive a running relay through its admin API: without
// the relay's token they fail with exit 1 and say the token is wrong; with it the
// relay pauses (status then exits 6, naming the pause) and resumes (status exits 0).
// The relay answers a name given in admin-hosts, and refuses another.
func TestPauseResumeCommands(t *testing.T) {
	t.Parallel()
	admin := testenv.FreeAddr(t)
	o := newOutboxEnv(t, "WALRELAY_METRICS_ADDR="+admin)
	relayEnv := slices.Concat(o.env, []string{"WALRELAY_ADMIN_TOKEN=cli-token", "WALRELAY_ADMIN_HOSTS=relay.test, ops.test"})
	relay := startProc(t, "relay", relayEnv, "run")
	waitStreaming(t, o.conn, o.slot, relay)
	waitStatus(t, time.Minute, 0, o.env)

	res := run(t, 30*time.Second, o.env, "pause")
	if res.code != 1 || !strings.Contains(res.stderr, "401") || !strings.Contains(res.stderr, "bearer token") {
		t.Fatalf("pause without the token: exit %d, stderr %q; want exit 1 and a 401 naming the bearer token", res.code, res.stderr)
	}
	res = run(t, 30*time.Second, o.env, "pause", "--admin-token", "cli-token", "--reason", "reindexing orders")
	if res.code != 0 || !strings.Contains(res.stdout, "paused the relay at http://"+admin) {
		t.Fatalf("pause: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	rep := waitStatus(t, 30*time.Second, 6, o.env)
	if rep.Relay == nil || !strings.HasPrefix(rep.Relay.Answer, "paused") {
		t.Fatalf("status while paused: %+v, want the relay's answer paused", rep)
	}
	// The reason is the relay's to tell: GET /pause (and /status, the console) say it.
	req, err := http.NewRequest(http.MethodGet, "http://"+admin+"/pause", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer cli-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var ps struct{ Reason string }
	err = json.NewDecoder(resp.Body).Decode(&ps)
	resp.Body.Close()
	if err != nil || ps.Reason != "reindexing orders" {
		t.Errorf("GET /pause after pause --reason: reason %q (%v), want %q", ps.Reason, err, "reindexing orders")
	}
	res = run(t, 30*time.Second, slices.Concat(o.env, []string{"WALRELAY_ADMIN_TOKEN=cli-token"}), "resume", "--admin-url", "http://"+admin)
	if res.code != 0 || !strings.Contains(res.stdout, "resumed the relay") {
		t.Fatalf("resume: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	waitStatus(t, 30*time.Second, 0, o.env)
	for host, want := range map[string]int{"ops.test": http.StatusOK, "other.test": http.StatusForbidden} {
		req, err := http.NewRequest(http.MethodGet, "http://"+admin+"/status", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Authorization", "Bearer cli-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /status to Host %s with admin-hosts relay.test, ops.test: %s, want %d", host, resp.Status, want)
		}
	}
	relay.stop(10 * time.Second)
}
