package admin

import (
	"embed"
	"io/fs"
	"net"
	"net/http"
)

// The console (docs/operations.md, "Console") is a page of the admin listener at
// /ui/: HTML, CSS and a little JavaScript embedded in the binary, which read and
// drive the admin API on the same origin. It is served under the admin API's rules
// but the token's: a browser's navigation carries no bearer token, so the page asks
// for it and sends it on each API request. A host or cross-site check that fails,
// or an admin API that is off, refuses the page too.

//go:embed ui
var consoleFiles embed.FS

// consolePolicy keeps the page to its own origin: no script, style, image or
// connection elsewhere, no framing by another page.
const consolePolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// consoleHandlers serves the console at /ui/ on mux, behind consoleGuard.
func consoleHandlers(mux *http.ServeMux, opts Options, addr net.Addr) {
	sub, err := fs.Sub(consoleFiles, "ui")
	if err != nil {
		panic(err) // the embedded tree is part of the binary: it has ui/
	}
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	guard := consoleGuard(opts.Token, opts.Hosts, addr)
	mux.Handle("GET /ui/", guard(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", consolePolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, req)
	})))
	mux.Handle("GET /ui", guard(http.RedirectHandler("/ui/", http.StatusMovedPermanently)))
}

// consoleGuard is adminGuard for the page's own files: the Host and cross-site
// checks, and off where the admin API is off; the token is the API's to ask.
func consoleGuard(token string, hosts []string, addr net.Addr) func(http.Handler) http.Handler {
	allowed := allowedHosts(hosts, addr)
	off := token == "" && !isLoopback(addr)
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if why := foreignHost(req, allowed); why != "" {
				http.Error(w, why, http.StatusForbidden)
				return
			}
			if why := crossSite(req); why != "" {
				http.Error(w, why, http.StatusForbidden)
				return
			}
			if off {
				http.Error(w, "the console is off, as the admin API is, on a non-loopback address without a token: "+
					"start the relay with --admin-token (WALRELAY_ADMIN_TOKEN), or on a loopback --metrics-addr", http.StatusForbidden)
				return
			}
			h.ServeHTTP(w, req)
		})
	}
}
