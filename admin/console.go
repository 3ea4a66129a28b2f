package admin

import (
	"net"
	"net/http"
)

// consoleHandlers serves the console (console.go's page) at /ui/. Stub until the page.
func consoleHandlers(mux *http.ServeMux, opts Options, addr net.Addr) {}
