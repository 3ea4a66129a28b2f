package admin_test

import (
	"net/http"
	"testing"
)

// A standby (waiting for the leadership lock) is doing its job: /readyz answers
// 200 naming it, so that a Kubernetes pair keeps both pods Ready and a rollout
// finishes; /readyz?streaming answers whether the relay moves events itself, 503
// for the standby and 200 for the leader. A malformed ?streaming is refused.
func TestStandbyIsReadyButNotStreaming(t *testing.T) {
	t.Parallel()
	dbURL, broker, _ := outboxWithBroker(t)
	addrs := []string{freeAddr(t), freeAddr(t)}
	withAddr := func(addr string) func(*config) {
		return func(c *config) { c.MetricsAddr = addr }
	}
	start(t, dbURL, broker, "readyz_pair", withAddr(addrs[0]))
	leader := "http://" + addrs[0]
	waitHTTP(t, leader+"/readyz?streaming", http.StatusOK, "streaming")
	start(t, dbURL, broker, "readyz_pair", withAddr(addrs[1]))
	standby := "http://" + addrs[1]
	waitHTTP(t, standby+"/readyz", http.StatusOK, "standby: another instance streams slot readyz_pair")

	for _, c := range []struct {
		url  string
		code int
		want string
	}{
		{standby + "/readyz?streaming", http.StatusServiceUnavailable, "standby: another instance streams slot readyz_pair\n"},
		{standby + "/readyz?streaming=true", http.StatusServiceUnavailable, "standby: another instance streams slot readyz_pair\n"},
		{standby + "/readyz?streaming=false", http.StatusOK, "standby: another instance streams slot readyz_pair\n"},
		{standby + "/readyz?streaming=maybe", http.StatusBadRequest, "streaming=\"maybe\": want true or false (or streaming alone for true)\n"},
		{leader + "/readyz", http.StatusOK, "streaming\n"},
		{leader + "/readyz?streaming=1", http.StatusOK, "streaming\n"},
	} {
		if code, body := adminCall(t, "GET", c.url, "", ""); code != c.code || string(body) != c.want {
			t.Errorf("GET %s: %d %q, want %d %q", c.url, code, body, c.code, c.want)
		}
	}
}
