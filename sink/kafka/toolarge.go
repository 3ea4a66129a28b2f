package kafka

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/sink"
)

// defaultMaxMessageBytes is franz-go's default ProducerBatchMaxBytes, Kafka's
// default max.message.bytes.
const defaultMaxMessageBytes = 1000012

// batchOverhead is more than a record batch's header and one record's framing
// take: a record this close to the producer's limit cannot fit in a batch.
const batchOverhead = 128

// tooLarge explains MESSAGE_TOO_LARGE with both limits and how to raise them. A
// record larger than the producer's own limit (--kafka-max-message-bytes) fails in
// franz-go before it is sent, every time: that is final, a dead letter at once. One
// the broker refused fitted the producer's limit, so it is the topic's
// max.message.bytes; it is retried as usual, in case the topic is changed meanwhile.
func (s *Sink) tooLarge(kr *kgo.Record, err error) error {
	limit := s.cfg.MaxMessageBytes
	if limit == 0 {
		limit = defaultMaxMessageBytes
	}
	size := len(kr.Key) + len(kr.Value)
	for _, h := range kr.Headers {
		size += len(h.Key) + len(h.Value)
	}
	if size+batchOverhead > limit {
		return &sink.EventError{Final: true, Err: fmt.Errorf("record of %d bytes for topic %s is larger than the producer's limit of %d bytes; "+
			"raise --kafka-max-message-bytes (and the topic's max.message.bytes, which must be as large), then run walrelay dlq retry: %w",
			size, kr.Topic, limit, err)}
	}
	return &sink.EventError{Err: fmt.Errorf("the broker refused a record of %d bytes for topic %s as too large for the topic's max.message.bytes "+
		"(the producer's own limit, --kafka-max-message-bytes, is %d); raise the topic's max.message.bytes "+
		"(kafka-configs --alter --entity-type topics --entity-name %s --add-config max.message.bytes=N): %w",
		size, kr.Topic, limit, kr.Topic, err)}
}
