package http

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"time"
)

// Standard Webhooks signing (https://www.standardwebhooks.com): the signed content
// is "webhook-id.webhook-timestamp.body", its HMAC-SHA256 under each secret is sent
// as "v1,<base64>", space-separated. webhook-id is the event id, the same on every
// attempt, so receivers deduplicate on it; webhook-timestamp is the attempt's own
// time in Unix seconds, signed again on every attempt, because receivers refuse
// timestamps more than 5 minutes away from their clock: an event from a backlog,
// or retried later, still verifies.

// Header names of the specification.
const (
	headerID        = "Webhook-Id"
	headerTimestamp = "Webhook-Timestamp"
	headerSignature = "Webhook-Signature"
)

// signature is the webhook-signature value for id, at and body under keys, or ""
// without keys.
func signature(keys [][]byte, id string, at time.Time, body []byte) string {
	if len(keys) == 0 {
		return ""
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	var out []byte
	for i, k := range keys {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(id))
		m.Write([]byte{'.'})
		m.Write([]byte(ts))
		m.Write([]byte{'.'})
		m.Write(body)
		if i > 0 {
			out = append(out, ' ')
		}
		out = append(out, "v1,"...)
		out = base64.StdEncoding.AppendEncode(out, m.Sum(nil))
	}
	return string(out)
}
