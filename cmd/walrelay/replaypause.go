package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/walrelay/walrelay/settings"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// relayPause is GET /pause's answer.
type relayPause struct {
	Paused bool       `json:"paused"`
	Since  *time.Time `json:"since"`
	Reason string     `json:"reason"`
}

// refuseWhilePaused asks the relay at --admin-url (else its --metrics-addr) whether
// it is paused, and refuses while it is: a paused relay publishes nothing, replays
// included. A relay that cannot be reached is said on w, and the replay goes on; one
// that refuses to answer (a token is missing or wrong) stops it, since it is there.
func refuseWhilePaused(ctx context.Context, s *settings.Settings, w io.Writer, now time.Time) error {
	base, _, err := adminURL(s)
	if err != nil {
		return err
	}
	if base == "" {
		fmt.Fprintln(w, "walrelay: warning: no relay to ask whether it is paused (no --admin-url, and --metrics-addr is empty); replaying anyway")
		return nil
	}
	var st relayPause
	err = adminRequest(ctx, http.MethodGet, base+"/pause", s.Admin.Token, &st)
	var refusal adminRefusal
	var unreachable *url.Error
	switch {
	case errors.As(err, &refusal) && (refusal.status == http.StatusUnauthorized || refusal.status == http.StatusForbidden):
		return runtimeError{fmt.Errorf("cannot learn whether the relay at %s is paused: %w; give the relay's --admin-token "+
			"(WALRELAY_ADMIN_TOKEN), or --ignore-pause to replay without asking", base, err)}
	case errors.As(err, &unreachable):
		fmt.Fprintf(w, "walrelay: warning: could not ask the relay at %s whether it is paused: %v; replaying anyway\n", base, unreachable.Err)
		return nil
	case err != nil:
		fmt.Fprintf(w, "walrelay: warning: could not ask the relay at %s whether it is paused: %v; replaying anyway\n", base, err)
		return nil
	case !st.Paused:
		return nil
	}
	var known []string
	if st.Since != nil {
		known = append(known, fmt.Sprintf("since %s, %s ago", st.Since.UTC().Format(time.RFC3339), now.Sub(*st.Since).Round(time.Second)))
	}
	if st.Reason != "" {
		known = append(known, "by "+st.Reason)
	}
	when := ""
	if len(known) > 0 {
		when = " (" + strings.Join(known, "; ") + ")"
	}
	return runtimeError{fmt.Errorf("the relay at %s is paused%s, and a paused relay publishes nothing, replays included: "+
		"resume it with walrelay resume, or give --ignore-pause to replay anyway", base, when)}
}
