package kafka

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/sink"
)

// MESSAGE_TOO_LARGE names both limits and how to raise them; only a record above
// the producer's own limit is final.
func TestTooLargeNamesBothLimits(t *testing.T) {
	s := &Sink{cfg: Config{MaxMessageBytes: 10000}, feed: newFeed(nil, nil, 1, 1)}
	cases := []struct {
		name  string
		size  int
		final bool
		want  []string
	}{
		{"above the producer's limit", 20000, true, []string{"producer's limit of 10000 bytes", "--kafka-max-message-bytes", "max.message.bytes", "dlq retry"}},
		{"refused by the broker", 5000, false, []string{"the broker refused", "topic's max.message.bytes", "--kafka-max-message-bytes, is 10000", "kafka-configs"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := s.tooLarge(&kgo.Record{Topic: "t", Value: make([]byte, c.size)}, kerr.MessageTooLarge)
			if !sink.IsEventError(err) || sink.IsFinal(err) != c.final || !errors.Is(err, kerr.MessageTooLarge) {
				t.Fatalf("event error %v, final %v (want %v), wraps MESSAGE_TOO_LARGE %v", sink.IsEventError(err),
					sink.IsFinal(err), c.final, errors.Is(err, kerr.MessageTooLarge))
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}
