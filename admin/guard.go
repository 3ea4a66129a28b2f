package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Who may call the admin API and the profiler (docs/operations.md, "Admin API").
// A web page in a browser on the relay's host must not drive or read them: not
// by a cross-site request (refused by its Origin or Sec-Fetch-Site, and by a body
// that is not JSON, which a page cannot send across sites without the relay's
// consent), and not by a name of its own resolved to the relay (DNS rebinding,
// refused by the Host). The command line and curl send none of those headers and
// a Host that names the relay, so they pass. /metrics, /healthz and /readyz stay
// outside the guard: scrapers and probes reach them by any name.

// adminGuard returns the middleware in front of the admin API and the profiler.
// It checks, in order: the Host names this relay (hosts adds names to the
// loopback ones and the listener's own address); the request is not cross-site;
// the bearer token, when one is set; a body is JSON. Without a token on a listener
// that is not loopback it refuses everything.
func adminGuard(token string, hosts []string, addr net.Addr, log *slog.Logger) func(http.Handler) http.Handler {
	allowed := allowedHosts(hosts, addr)
	off := token == "" && !isLoopback(addr)
	if off {
		log.Warn("admin API off: the metrics address is not loopback and no admin token is set; "+
			"set --admin-token (WALRELAY_ADMIN_TOKEN) to use /status, /pause, /resume, /dlq, /replay and /debug/pprof here",
			"addr", addr.String())
	}
	want := tokenDigest("Bearer " + token)
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if why := foreignHost(req, allowed); why != "" {
				writeJSON(w, http.StatusForbidden, adminError{why})
				return
			}
			if why := crossSite(req); why != "" {
				writeJSON(w, http.StatusForbidden, adminError{why})
				return
			}
			if off {
				writeJSON(w, http.StatusForbidden, adminError{"the admin API is off on a non-loopback address without a token: " +
					"start the relay with --admin-token (WALRELAY_ADMIN_TOKEN), or on a loopback --metrics-addr"})
				return
			}
			if token != "" && !tokenMatches(want, req.Header.Get("Authorization")) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="walrelay"`)
				writeJSON(w, http.StatusUnauthorized, adminError{"missing or wrong bearer token: send Authorization: Bearer <the relay's --admin-token>"})
				return
			}
			if why := notJSON(req); why != "" {
				writeJSON(w, http.StatusUnsupportedMediaType, adminError{why})
				return
			}
			h.ServeHTTP(w, req)
		})
	}
}

// tokenDigest is what a bearer token is compared by: its SHA-256, so that the
// comparison takes as long whatever the lengths (subtle.ConstantTimeCompare
// returns at once on a length mismatch).
func tokenDigest(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// tokenMatches reports whether got is the value whose digest is want, in time
// that depends on the length of got alone (which its sender knows): not on how
// much of it matches, nor on the token's length.
func tokenMatches(want [sha256.Size]byte, got string) bool {
	d := tokenDigest(got)
	return subtle.ConstantTimeCompare(d[:], want[:]) == 1
}

// checkAdminHosts says what is wrong with an AdminHosts entry: each is a host
// name or address as a Host header carries it, without scheme, port or path.
func checkAdminHosts(hosts []string) error {
	for _, h := range hosts {
		bare := strings.Trim(strings.TrimSpace(h), "[]")
		_, _, portErr := net.SplitHostPort(strings.TrimSpace(h))
		if bare == "" || strings.ContainsAny(bare, "/@?# ") || portErr == nil && net.ParseIP(bare) == nil {
			return fmt.Errorf("admin-hosts entry %q: give a host name or address alone, without scheme, port or path "+
				"(e.g. walrelay or walrelay.ops.svc.cluster.local)", h)
		}
	}
	return nil
}

// allowedHosts are the names, lower-cased, that a request's Host may carry
// besides a loopback address and the address it came in on: localhost, hosts,
// and the listener's own address when it is not a wildcard.
func allowedHosts(hosts []string, addr net.Addr) map[string]bool {
	allowed := map[string]bool{"localhost": true}
	for _, h := range hosts {
		h = strings.Trim(strings.ToLower(strings.TrimSpace(h)), "[]")
		if ip := net.ParseIP(h); ip != nil {
			h = ip.String()
		}
		if h != "" {
			allowed[h] = true
		}
	}
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP != nil && !tcp.IP.IsUnspecified() {
		allowed[tcp.IP.String()] = true
	}
	return allowed
}

// foreignHost says why the request's Host does not name this relay, or "". A
// page that resolved a name of its own to the relay sends that name.
func foreignHost(req *http.Request, allowed map[string]bool) string {
	host := strings.ToLower(req.Host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsLoopback() || allowed[ip.String()] {
			return ""
		}
		if local, ok := req.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok && local.IP.Equal(ip) {
			return ""
		}
	} else if allowed[host] {
		return ""
	}
	return "Host " + strconv.Quote(req.Host) + " does not name this relay: the admin API answers requests to a loopback address, " +
		"localhost or the address it listens on; add the name you call it by to --admin-hosts (WALRELAY_ADMIN_HOSTS)"
}

// crossSite says why the request comes from a web page of another origin, or "":
// an Origin other than the one its Host names, or Sec-Fetch-Site cross-site or
// same-site. The command line and curl send neither.
func crossSite(req *http.Request) string {
	switch site := req.Header.Get("Sec-Fetch-Site"); site {
	case "cross-site", "same-site":
		return "refused a " + site + " request (Sec-Fetch-Site): the admin API does not answer web pages of other origins"
	}
	origin := req.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	scheme := "http"
	if req.TLS != nil {
		scheme = "https"
	}
	if sameOrigin(origin, scheme, req.Host) {
		return ""
	}
	return "refused a request from origin " + strconv.Quote(origin) + ", which is not " + scheme + "://" + req.Host +
		": the admin API does not answer web pages of other origins"
}

// sameOrigin reports whether origin is scheme://host, default ports filled in.
func sameOrigin(origin, scheme, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Path != "" || u.User != nil {
		return false // "null" among others
	}
	return strings.EqualFold(u.Scheme, scheme) && hostPort(u.Host, u.Scheme) == hostPort(host, scheme)
}

// hostPort is host:port lower-cased, with the scheme's default port when host
// has none.
func hostPort(host, scheme string) string {
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		h, port = strings.Trim(host, "[]"), "80"
		if strings.EqualFold(scheme, "https") {
			port = "443"
		}
	}
	return net.JoinHostPort(strings.ToLower(h), port)
}

// notJSON says why a request's body is refused, or "": one is there and not
// application/json. A web page can send a body of another type across sites
// without asking; JSON needs the relay's consent, which it never gives.
func notJSON(req *http.Request) string {
	if req.ContentLength == 0 && len(req.TransferEncoding) == 0 {
		return ""
	}
	ct := req.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		return ""
	}
	return "a request body must be Content-Type: application/json, got " + strconv.Quote(ct)
}

// isLoopback reports whether addr is a loopback address only.
func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
