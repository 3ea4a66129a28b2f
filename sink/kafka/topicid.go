package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// forgetRecreatedTopic makes the client forget a topic the broker answered
// UNKNOWN_TOPIC_ID for: it was deleted and created again under its name, and
// franz-go keeps producing to the old topic ID until the topic is purged from the
// client (PurgeTopicsFromClient, as franz-go's README says for a recreated topic).
// The records still buffered for it fail, so the relay's session ends and streams
// them again; the next produce loads the topic's new ID. It runs apart from the
// promise, which must not block, once per topic at a time.
func (s *Sink) forgetRecreatedTopic(topic string, err error) {
	if s.client == nil || !errors.Is(err, kerr.UnknownTopicID) { // nil: a test's sink without a client
		return
	}
	if _, busy := s.purging.LoadOrStore(topic, struct{}{}); busy {
		return
	}
	go func() {
		defer s.purging.Delete(topic)
		s.client.PurgeTopicsFromClient(topic)
	}()
}
