package admin

import (
	"net/http"
	"strings"
	"unicode/utf8"
)

// maxPauseReason bounds a pause's reason, in characters.
const maxPauseReason = 500

// pauseRequest is POST /pause's body, which may be left out: why the relay is
// paused, said back by GET /pause, /status and the console to whoever looks.
type pauseRequest struct {
	Reason string `json:"reason"`
}

// servePause pauses the relay, with the reason the body gives (or the command's
// default), and answers whether that changed anything.
func (a *relayAPI) servePause(w http.ResponseWriter, req *http.Request) {
	var body pauseRequest
	if !decodeBody(w, req, 16<<10, &body, true, `want no body or {"reason": "why the relay is paused"}`) {
		return
	}
	reason := strings.TrimSpace(body.Reason)
	if utf8.RuneCountInString(reason) > maxPauseReason {
		writeJSON(w, http.StatusBadRequest, adminError{"reason: at most 500 characters; say where the rest is written down"})
		return
	}
	if reason == "" {
		reason = "POST /pause (walrelay pause)"
	}
	writeJSON(w, http.StatusOK, pauseAnswer{Paused: true, Changed: a.r.PauseBecause(reason)})
}
