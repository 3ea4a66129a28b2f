package main

import (
	"sync"

	"github.com/walrelay/walrelay/internal/redact"
	"github.com/walrelay/walrelay/ops"
)

// loadedURLs are the values the process's URL settings (kindURL, kindURLs) were
// given, from flags, environment, the file or a databases entry: the errors execute
// prints and every log line are redacted of them (internal/redact), whatever
// library's message carries one.
var loadedURLs struct {
	mu     sync.Mutex
	values []string
}

// noteURL adds v to loadedURLs.
func noteURL(v string) {
	if v == "" {
		return
	}
	loadedURLs.mu.Lock()
	defer loadedURLs.mu.Unlock()
	for _, have := range loadedURLs.values {
		if have == v {
			return
		}
	}
	loadedURLs.values = append(loadedURLs.values, v)
}

// urlValues returns loadedURLs' values.
func urlValues() []string {
	loadedURLs.mu.Lock()
	defer loadedURLs.mu.Unlock()
	return append([]string(nil), loadedURLs.values...)
}

// isURLKind reports whether a setting of kind holds where a server is reached.
func isURLKind(kind string) bool { return kind == kindURL || kind == kindURLs }

// noteURLSettings makes each URL setting of s note the values it is given.
func (s *settings) noteURLSettings() {
	for i := range s.all {
		if !isURLKind(s.all[i].kind) {
			continue
		}
		set := s.all[i].set
		s.all[i].set = func(v string) error {
			noteURL(v)
			return set(v)
		}
	}
}

// redactStatus redacts the loaded URLs in what status prints of st: the problems,
// and the relay's address, answer and error.
func redactStatus(st *ops.Status) {
	r := redact.NewRedactor(urlValues()...)
	for i := range st.Problems {
		st.Problems[i].Message = r.Text(st.Problems[i].Message)
	}
	if h := st.Relay; h != nil {
		h.URL, h.Answer, h.Error = r.Text(h.URL), r.Text(h.Answer), r.Text(h.Error)
	}
}

// redactLoaded is err with every loaded URL redacted in its message.
func redactLoaded(err error) error {
	return redact.Error(err, urlValues()...)
}
