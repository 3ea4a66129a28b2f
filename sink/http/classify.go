package http

import (
	"errors"
	"fmt"
	nethttp "net/http"
	"strconv"
	"time"
)

// class is what one attempt's outcome means for its event.
type class int

const (
	// delivered: a 2xx answer.
	delivered class = iota
	// unavailable: no answer (a connection error, a timeout), 408, 429 or 5xx. The
	// receiver is down or busy: the event is sent again in its place after a backoff
	// (429's and 503's Retry-After honoured), nothing is handed over.
	unavailable
	// unusable: 401, 403, a redirect the sink does not follow, and 404 or 405 on a
	// URL without a template. The endpoint or its credentials are wrong for every
	// event alike: held and sent again as for unavailable, never a dead letter per
	// event, until the operator fixes the configuration.
	unusable
	// refused: the answer depends on the event (400, 413, 415, 422, 404 and 410 on a
	// templated URL, any other 4xx): an *sink.EventError, handed to the poller,
	// which dead-letters it after --max-attempts.
	refused
)

func (c class) String() string {
	return [...]string{"delivered", "unavailable", "unusable", "refused"}[c]
}

// classifyStatus decides what a status means; templated is whether the URL has a
// placeholder, so that 404 may be about the event rather than the endpoint.
func classifyStatus(status int, templated bool) class {
	switch {
	case status >= 200 && status < 300:
		return delivered
	case status == nethttp.StatusRequestTimeout, status == nethttp.StatusTooManyRequests, status >= 500:
		return unavailable
	case status == nethttp.StatusUnauthorized, status == nethttp.StatusForbidden:
		return unusable
	case (status == nethttp.StatusNotFound || status == nethttp.StatusMethodNotAllowed) && !templated:
		return unusable
	case status >= 400:
		return refused
	}
	return unusable // 1xx, or a 3xx the client did not follow
}

// retryAfter reads Retry-After (seconds or an HTTP date) relative to now; 0 when
// absent or past. It is capped at maxRetryAfter.
func retryAfter(h nethttp.Header, now time.Time) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	var d time.Duration
	if s, err := strconv.Atoi(v); err == nil {
		d = time.Duration(s) * time.Second
	} else if t, err := nethttp.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}

// maxRetryAfter bounds a receiver's Retry-After, so that a mistaken one does not
// hold events for hours.
const maxRetryAfter = 5 * time.Minute

// errRedirect is a redirect the sink does not follow: only 307 and 308 to the
// same scheme and host keep the method, the body and the signature's meaning.
type errRedirect struct {
	status int
	target string
}

func (e *errRedirect) Error() string {
	return fmt.Sprintf("the endpoint redirects (%d) to %s; only 307 and 308 to the same host are followed: set --http-url to the target", e.status, e.target)
}

func isRedirect(err error) bool {
	var r *errRedirect
	return errors.As(err, &r)
}
