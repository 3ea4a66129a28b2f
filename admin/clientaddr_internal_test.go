package admin

import (
	"net/http"
	"testing"
)

// X-Forwarded-For is believed only from the proxies named, and only back to the
// first address no trusted proxy holds.
func TestRemoteAddrTrustsNamedProxiesOnly(t *testing.T) {
	proxies, err := parseTrustedProxies([]string{"10.0.0.0/8", "192.0.2.7"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ peer, xff, want string }{
		{"203.0.113.9:5000", "", "203.0.113.9"},
		{"203.0.113.9:5000", "198.51.100.1", "203.0.113.9"},        // not a proxy: its header is ignored
		{"192.0.2.7:443", "198.51.100.1", "198.51.100.1"},          // a named proxy
		{"10.1.2.3:443", "198.51.100.1, 10.9.9.9", "198.51.100.1"}, // two trusted hops
		{"10.1.2.3:443", "6.6.6.6, 198.51.100.1", "198.51.100.1"},  // the client's own claim is not believed
		{"10.1.2.3:443", "", "10.1.2.3"},                           // a proxy that says nothing
		{"10.1.2.3:443", "garbage, 10.9.9.9", "10.9.9.9"},          // stop at what is no address
		{"[::ffff:10.1.2.3]:443", "198.51.100.1", "198.51.100.1"},  // v4 in v6
	} {
		req := &http.Request{RemoteAddr: c.peer, Header: http.Header{}}
		if c.xff != "" {
			req.Header.Set("X-Forwarded-For", c.xff)
		}
		if got := proxies.remoteAddr(req); got != c.want {
			t.Errorf("peer %s, X-Forwarded-For %q: %s, want %s", c.peer, c.xff, got, c.want)
		}
	}
	if _, err := parseTrustedProxies([]string{"proxy.example"}); err == nil {
		t.Errorf("a host name as a trusted proxy: no error, want one")
	}
	if err := (Options{TrustedProxies: []string{"10.0.0.0/33"}}).Validate(); err == nil {
		t.Errorf("Validate with a bad network: no error, want one")
	}
}
