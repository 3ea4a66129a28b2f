package settings

import "sync"

// loadedURLs are the values the process's URL settings (kindURL, kindURLs) were
// given, from flags, environment, the file or a databases entry: the errors the
// binary prints and every log line are redacted of them (internal/redact), whatever
// library's message carries one. They are the process's, as its log is.
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

// LoadedURLs returns the values every URL setting of the process was given so far
// (from flags, environment, a file or a databases entry), for redacting them from
// what is printed or logged (internal/redact).
func LoadedURLs() []string {
	loadedURLs.mu.Lock()
	defer loadedURLs.mu.Unlock()
	return append([]string(nil), loadedURLs.values...)
}

// isURLKind reports whether a setting of kind holds where a server is reached.
func isURLKind(kind string) bool { return kind == kindURL || kind == kindURLs }

// noteURLSettings makes each URL setting of s note the values it is given.
func (s *Settings) noteURLSettings() {
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
