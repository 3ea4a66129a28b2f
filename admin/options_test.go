package admin_test

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/admin"
)

// The listener's options are checked before anything listens: an address that is
// not host:port, and an admin-hosts entry with a scheme, a port or nothing, say so.
func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts admin.Options
		want string // substring of the error; "" means valid
	}{
		{"none", admin.Options{}, ""},
		{"loopback", admin.Options{Addr: "127.0.0.1:9731"}, ""},
		{"bad metrics addr", admin.Options{Addr: "9731"}, "metrics address"},
		{"admin hosts", admin.Options{Hosts: []string{"walrelay", "10.0.0.7", "::1", "[fd00::1]"}}, ""},
		{"admin host with a scheme", admin.Options{Hosts: []string{"http://walrelay"}}, "admin-hosts entry"},
		{"admin host with a port", admin.Options{Hosts: []string{"walrelay:9731"}}, "without scheme, port or path"},
		{"empty admin host", admin.Options{Hosts: []string{""}}, "admin-hosts entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}
