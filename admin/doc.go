// Package admin serves a relay, or a Group of relays, over HTTP: one listener with
// /metrics, /healthz and /readyz, the admin API (GET /status, GET and POST /pause,
// POST /resume, GET /dlq, GET /dlq/ID/record, POST /dlq/retry, POST /dlq/purge,
// POST and GET /replay, GET /replay/ID, GET /overview, GET /databases), the console
// at /ui/ that drives it and, with Options.Pprof, Go's profiler. An embedding program runs Serve (or ServeGroup)
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
//   - The console's files are refused where the admin API is (a foreign Host, a
//     cross-site request, the API off) and load nothing from another origin; the
//     token it sends is the API's to check. GET /overview, which it polls, reads
//     the relay's memory only: a console left open adds no query.
//
//   - Every admin action (each POST) is logged with the address it came from;
//     X-Forwarded-For is believed from Options.TrustedProxies only.
//
// admin reads a relay only through its methods (Ready, Pause, Resume, PauseState,
// Gatherer, Pool, Sink, PauseGate, Stores, Config, Samples, Stalled, BrokerDown); it imports relay, and relay
// never imports it.
package admin
