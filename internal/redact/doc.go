// Package redact hides the secrets a connection setting may carry before it is shown:
// in a log line, an error, /readyz, /status or `walrelay status`. One function,
// URL, redacts every URL-shaped setting (PostgreSQL URLs and keyword/value strings,
// broker URLs and lists of them, endpoints); Error and Text redact such a value
// wherever it appears inside a message. A value that does not parse is redacted
// more, never printed as it was given.
package redact
