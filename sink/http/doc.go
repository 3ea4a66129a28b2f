// Package http is the HTTP sink: each outbox event is POSTed to an endpoint, one
// request per event, signed as the Standard Webhooks specification says, and is
// acknowledged only by a 2xx answer.
//
// # Requests
//
// The URL is Config.URL; its path and query may use {aggregate_type} and
// {event_type}, escaped for their place (url.go), never its host. The body is the
// record value package record makes of the event (Config.Format); its
// Content-Type: application/json for value-converter json, and for string over a
// json or jsonb payload; text/plain; charset=utf-8 for other string values;
// application/octet-stream for bytearray. The record headers become HTTP headers,
// each _ in a name turned into - (nginx drops names with an underscore by default)
// and the name in canonical form: Id, Event-Type, Aggregate-Type, Aggregate-Id,
// Created-At, then the headers taken from columns (tenant_id -> Tenant-Id). A
// value that is not printable ASCII is sent base64 under its name with -Base64
// appended; a NULL one is left out. A tombstone is an empty body with
// Tombstone: true. Config.Headers are added to every request, their values read
// from the environment or a file when the sink is created.
//
// Every request carries webhook-id (the event id, the same on every attempt),
// webhook-timestamp (the attempt's time) and, with Config.SigningSecrets,
// webhook-signature: v1, and the HMAC-SHA256 of "id.timestamp.body", one per
// secret during a rotation (sign.go).
//
// # Guarantees
//
// At least once: done(nil) only on a 2xx answer. A request whose answer was lost
// is sent again, and so is every event a relay streams again after a crash;
// receivers deduplicate on webhook-id.
//
// Order per aggregate (aggregate type and id): one request at a time per
// aggregate, the next only once the previous one was taken or settled as an
// *sink.EventError; different aggregates are sent in parallel, up to
// Config.MaxConnections requests, over kept-alive connections, HTTP/2 where the
// server offers it.
//
// # Failures
//
// The answer's class (classify.go): 2xx is delivered. No answer (a connection
// error, a timeout), 408, 429 and 5xx mean the receiver is unavailable; 401, 403,
// 404 and 405 on a URL without a template, and a redirect other than a 307 or 308
// to the same host mean the endpoint or its credentials are wrong. In both cases
// nothing is handed over: the event is sent again in its place after a backoff
// (200ms doubling to 5s, or the answer's Retry-After, at most 5 minutes), for as
// long as it takes, its aggregate held behind it, as with a broker outage; the
// relay's health turns after --ack-timeout, LastError says why, and a warning is
// logged at most every 10s. The other 4xx answers (400, 413, 415, 422, 404 and 410
// on a templated URL, ...) are about the event: an *sink.EventError with the
// status and the first 256 bytes of the body, which the relay hands to the poller
// and which becomes a dead letter after --max-attempts. So is, at once, an event
// the URL or the headers cannot carry (an aggregate type of "." or ".." in the
// path, a column header named as one the sink sets).
//
// Ping, the relay's probe while idle, connects (TCP, and TLS for https) and sends
// no request.
//
// # Not guaranteed
//
//   - Exactly once: a receiver sees repeats and deduplicates on webhook-id.
//   - Order across aggregates, or for an event handed over as an event error.
package http
