package http

import (
	"encoding/base64"
	"fmt"
	"net/textproto"
	"strings"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
)

// Content types by the value converter.
const (
	contentJSON   = "application/json"
	contentText   = "text/plain; charset=utf-8"
	contentBinary = "application/octet-stream"
)

// base64Suffix ends the name of a header whose value is sent base64-encoded.
const base64Suffix = "-Base64"

// request is what is sent for one event, whatever the attempt: the signature and
// its timestamp are added to each attempt (sign.go).
type request struct {
	url         string
	body        []byte
	contentType string
	headers     [][2]string // canonical name, value
}

// contentType says what the body is: application/json for the json converter, and
// for the string converter over a json or jsonb payload written as it is;
// text/plain for other string values; application/octet-stream for bytearray and
// the registry converters (avro, protobuf, json-schema), whose framed bytes are no
// text (a magic byte and a binary schema id lead them).
func contentType(f *record.Format, e *outbox.Event) string {
	switch f.ValueConverter {
	case record.JSON:
		return contentJSON
	case record.ByteArray, record.Avro, record.Protobuf, record.JSONSchema:
		return contentBinary
	}
	if (e.PayloadType == "json" || e.PayloadType == "jsonb") && len(e.Envelope) == 0 && !f.ExpandJSON.Enabled {
		return contentJSON
	}
	return contentText
}

// headerName maps a record header to an HTTP header name proxies keep: nginx
// drops names with an underscore by default, so each _ becomes -; then the
// canonical form (aggregate_id -> Aggregate-Id).
func headerName(key string) string {
	return textproto.CanonicalMIMEHeaderKey(strings.ReplaceAll(key, "_", "-"))
}

// ownHeader is a name the sink or HTTP itself sets, which no event header or fixed
// header may take.
func ownHeader(name string) bool {
	switch name {
	case "Content-Type", "Content-Length", "Content-Encoding", "Transfer-Encoding", "Host", "Connection",
		"Te", "Trailer", "Upgrade", "Keep-Alive", "Proxy-Connection", "Tombstone":
		return true
	}
	return strings.HasPrefix(name, "Webhook-")
}

// buildRequest makes e's request: the record value as the body, the record headers
// as HTTP headers (headerName; a value that is not printable ASCII base64 with
// base64Suffix on its name; a null one left out), Tombstone: true for a
// tombstone (an empty body), then the fixed headers. An error is about e alone.
func buildRequest(f *record.Format, t *urlTemplate, fixed [][2]string, e *outbox.Event) (*request, error) {
	if err := t.check(e); err != nil {
		return nil, err
	}
	value, tombstone := f.Value(e)
	r := &request{url: t.render(e), body: value, contentType: contentType(f, e),
		headers: make([][2]string, 0, record.OwnHeaders+len(e.Headers)+len(fixed)+1)}
	var err error
	f.EachHeader(e, func(key string, v []byte) {
		if v == nil || err != nil {
			return
		}
		name, val := headerName(key), string(v)
		if !printable(val) {
			name, val = name+base64Suffix, base64.StdEncoding.EncodeToString(v)
		}
		if ownHeader(name) {
			err = fmt.Errorf("record header %q becomes HTTP header %s, which the sink sets itself; give its column another header name (column:header)", key, name)
			return
		}
		for _, h := range fixed {
			if h[0] == name {
				err = fmt.Errorf("record header %q becomes HTTP header %s, which --http-headers sets; give its column another header name (column:header)", key, name)
				return
			}
		}
		r.headers = append(r.headers, [2]string{name, val})
	})
	if err != nil {
		return nil, err
	}
	if tombstone {
		r.headers = append(r.headers, [2]string{"Tombstone", "true"})
	}
	r.headers = append(r.headers, fixed...)
	return r, nil
}
