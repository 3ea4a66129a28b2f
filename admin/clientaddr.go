package admin

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Who made a request, for the log line every admin action writes
// (docs/operations.md, "Console"): the peer's address, or, when the peer is a proxy
// named in --admin-trusted-proxies, the address the proxies say they forwarded for.
// X-Forwarded-For from anyone else is ignored: a client could write anything there.

// trustedProxies are the addresses and networks whose X-Forwarded-For is believed.
type trustedProxies []netip.Prefix

// parseTrustedProxies reads --admin-trusted-proxies: addresses or CIDR networks.
func parseTrustedProxies(entries []string) (trustedProxies, error) {
	var out trustedProxies
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if p, err := netip.ParsePrefix(e); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(strings.Trim(e, "[]"))
		if err != nil {
			return nil, fmt.Errorf("admin-trusted-proxies entry %q: give an IP address (10.0.0.7) or a network (10.0.0.0/8), not a name", e)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

func (t trustedProxies) trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// remoteAddr is the address req came from: the peer's, or, while the peer and each
// proxy after it are trusted, the nearest untrusted address X-Forwarded-For names.
func (t trustedProxies) remoteAddr(req *http.Request) string {
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		host = req.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !t.trusts(peer) {
		return host
	}
	var hops []string
	for _, v := range req.Header.Values("X-Forwarded-For") {
		for _, h := range strings.Split(v, ",") {
			hops = append(hops, strings.TrimSpace(h))
		}
	}
	client := peer.String()
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(hops[i])
		if err != nil {
			break // a hop that is no address: believe nothing before it
		}
		client = a.Unmap().String()
		if !t.trusts(a) {
			break
		}
	}
	return client
}
