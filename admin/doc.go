// Package admin serves a relay, or a Group of relays, over HTTP: one listener with
// /metrics, /healthz and /readyz, the admin API (GET /status, GET and POST /pause,
// POST /resume, GET /dlq, POST /dlq/retry, POST /replay, GET /replay/ID) and, with
// Options.Pprof, Go's profiler. An embedding program runs Serve (or ServeGroup)
// beside Relay.Run (Group.Run) with the same context.
//
// What it guarantees:
//
//   - /readyz answers what Relay.Ready says, 200 or 503, within the bound the
//     relay's own signals keep (docs/design.md invariant 11); for a group, each
//     database by ?database=NAME or all at once, a standby counting as ready.
//
//   - /metrics, /healthz and /readyz answer any Host, without a token: scrapers
//     and probes reach them by any name.
//
//   - The admin API and the profiler are behind one guard (guard.go): on a
//     loopback address they are open unless a token is set; on any other they need
//     Options.Token, and without one they are off (403) rather than open to the
//     network (docs/operations.md, "Admin API"). They refuse web pages: a
//     cross-site request, a Host that does not name the relay (DNS rebinding), and
//     a body that is not JSON.
//
//   - A replay started with POST /replay publishes through the relay's own sink
//     and waits while the relay is paused: a paused relay publishes nothing.
//
// admin reads a relay only through its methods (Ready, Pause, Resume, PauseState,
// Gatherer, Pool, Sink, PauseGate, Stores, Config); it imports relay, and relay
// never imports it.
package admin
