package admin

import (
	"errors"
	"fmt"
	"net"
)

// Options are the listener's: where it listens and who may call the admin API and
// the profiler there (docs/operations.md, "Admin API").
type Options struct {
	// Addr is the listener's host:port (walrelay's --metrics-addr). Empty: Serve
	// and ServeGroup serve nothing and return nil at once.
	Addr string
	// Pprof also serves Go's profiler under /debug/pprof/, behind the admin
	// API's guard.
	Pprof bool
	// Token is the bearer token the admin API and the profiler ask for. Without
	// one they answer on a loopback address only.
	Token string
	// Hosts are host names (or addresses) the admin API and the profiler answer
	// requests to, besides loopback addresses, localhost and the address the
	// listener is reached at: the names it is called by, such as a Service's. A
	// request to any other Host is refused, which keeps a DNS-rebinding web page
	// out.
	Hosts []string
	// TrustedProxies are the addresses and CIDR networks of reverse proxies in
	// front of the listener: from them alone X-Forwarded-For is believed when an
	// admin action is logged with the address it came from.
	TrustedProxies []string
}

// Validate checks the options without listening.
func (o Options) Validate() error {
	var addr error
	if o.Addr != "" {
		if _, _, err := net.SplitHostPort(o.Addr); err != nil {
			addr = fmt.Errorf("metrics address %q is not host:port", o.Addr)
		}
	}
	_, proxies := parseTrustedProxies(o.TrustedProxies)
	return errors.Join(addr, checkAdminHosts(o.Hosts), proxies)
}
