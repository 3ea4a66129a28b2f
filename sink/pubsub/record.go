package pubsub

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	gpubsub "cloud.google.com/go/pubsub/v2"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/protobuf/proto"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
)

// message builds the Pub/Sub message of e from the record package record makes of
// it as f says, as the other sinks build theirs: the record value is the data; the
// attributes are its headers (with the default format id, event_type,
// aggregate_type, aggregate_id and created_at, RFC 3339 with nanoseconds, UTC),
// then the headers taken from columns (a null value as an empty one), then
// tombstone=true for a tombstone (empty data); the ordering key is the aggregate id.
func message(f *record.Format, e *outbox.Event) *gpubsub.Message {
	value, tombstone := f.Value(e)
	attrs := make(map[string]string, record.OwnHeaders+1+len(e.Headers))
	f.EachHeader(e, func(key string, v []byte) { attrs[key] = string(v) })
	if tombstone {
		attrs["tombstone"] = "true"
	}
	return &gpubsub.Message{Data: value, Attributes: attrs, OrderingKey: e.AggregateID}
}

// Pub/Sub's resource limits on a published message.
const (
	maxMessageBytes  = 10_000_000 // data, attributes and ordering key, as encoded
	maxAttributes    = 100
	maxAttrKeyBytes  = 256
	maxAttrValBytes  = 1024
	maxOrderingBytes = 1024
	maxTopicIDBytes  = 255
)

// errRefused marks what the sink refuses before sending: Pub/Sub would refuse it.
var errRefused = errors.New("pubsub would refuse the message")

// check finds what Pub/Sub would refuse in m for topic, before it is sent.
func check(topic string, m *gpubsub.Message) error {
	if err := checkTopic(topic); err != nil {
		return fmt.Errorf("%w: topic %q: %w", errRefused, topic, err)
	}
	if len(m.OrderingKey) > maxOrderingBytes || !utf8.ValidString(m.OrderingKey) {
		return fmt.Errorf("%w: its ordering key (the aggregate id, %d bytes) must be valid UTF-8 of at most %d bytes",
			errRefused, len(m.OrderingKey), maxOrderingBytes)
	}
	if len(m.Attributes) > maxAttributes {
		return fmt.Errorf("%w: %d attributes, at most %d; place fewer columns as headers", errRefused, len(m.Attributes), maxAttributes)
	}
	for k, v := range m.Attributes {
		switch {
		case k == "" || len(k) > maxAttrKeyBytes || !utf8.ValidString(k):
			return fmt.Errorf("%w: attribute key %.40q must be valid UTF-8 of 1 to %d bytes", errRefused, k, maxAttrKeyBytes)
		case strings.HasPrefix(k, "goog"):
			return fmt.Errorf("%w: attribute key %q: keys starting with goog are reserved; rename the header", errRefused, k)
		case len(v) > maxAttrValBytes || !utf8.ValidString(v):
			return fmt.Errorf("%w: attribute %s is %d bytes, at most %d of valid UTF-8", errRefused, k, len(v), maxAttrValBytes)
		}
	}
	if n := proto.Size(&pb.PubsubMessage{Data: m.Data, Attributes: m.Attributes, OrderingKey: m.OrderingKey}); n > maxMessageBytes {
		return fmt.Errorf("%w: the message is %d bytes, more than Pub/Sub's 10 MB (%d bytes)", errRefused, n, maxMessageBytes)
	}
	return nil
}

// checkTopic applies Pub/Sub's rule for topic IDs: 3 to 255 characters, a letter
// first, then letters, digits and - _ . ~ + %, not starting with goog.
func checkTopic(id string) error {
	if len(id) < 3 || len(id) > maxTopicIDBytes {
		return fmt.Errorf("a topic ID has 3 to %d characters, this one %d", maxTopicIDBytes, len(id))
	}
	if c := id[0]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
		return errors.New("a topic ID starts with a letter")
	}
	if strings.HasPrefix(id, "goog") {
		return errors.New("topic IDs starting with goog are reserved")
	}
	for _, c := range id {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune("-_.~+%", c)) {
			return fmt.Errorf("%q is not allowed in a topic ID (letters, digits and - _ . ~ + %%)", c)
		}
	}
	return nil
}

// sampleEvent is what Validate renders the topic template for.
var sampleEvent = &outbox.Event{AggregateType: "order", EventType: "order.created"}
