package main

import (
	"github.com/walrelay/walrelay/internal/redact"
	"github.com/walrelay/walrelay/ops"
	"github.com/walrelay/walrelay/settings"
)

// redactStatus redacts the loaded URLs in what status prints of st: the problems,
// and the relay's address, answer and error.
func redactStatus(st *ops.Status) {
	r := redact.NewRedactor(settings.LoadedURLs()...)
	for i := range st.Problems {
		st.Problems[i].Message = r.Text(st.Problems[i].Message)
	}
	if h := st.Relay; h != nil {
		h.URL, h.Answer, h.Error = r.Text(h.URL), r.Text(h.Answer), r.Text(h.Error)
	}
}

// redactLoaded is err with every loaded URL redacted in its message.
func redactLoaded(err error) error {
	return redact.Error(err, settings.LoadedURLs()...)
}
