package kafka

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A record whose event names its partition (outbox.Event.Partition) carries one of
// these as its Context, which is how the partitioner tells it from a record whose
// Partition field is merely zero. franz-go only waits on a record's context, and
// these are never done.
type partitionMark struct{ context.Context }

var (
	presetMark = &partitionMark{context.Background()}
	// outOfRangeMark: the partitioner found the preset partition beyond the topic's.
	outOfRangeMark = &partitionMark{context.Background()}
)

// badPartition is the Context of a record whose partition text is not a partition
// number; reason says why.
type badPartition struct {
	context.Context
	reason error
}

// presetPartition makes r go to the partition text names, when it names one.
func presetPartition(r *kgo.Record, text string) {
	if text == "" {
		return // NULL or no partition column: the key hash decides
	}
	p, err := strconv.ParseInt(text, 10, 32)
	if err != nil || p < 0 {
		r.Context = &badPartition{context.Background(),
			fmt.Errorf("partition column value %q is not a partition number (a whole number from 0); fix the row or leave the column NULL", text)}
		r.Partition = -1
		return
	}
	r.Context, r.Partition = presetMark, int32(p)
}

// partitionFault is the error of a record failed for its preset partition, nil for
// any other record.
func partitionFault(r *kgo.Record) error {
	switch c := r.Context.(type) {
	case *badPartition:
		return c.reason
	case *partitionMark:
		if c == outOfRangeMark {
			return fmt.Errorf("partition column value %d is not a partition of topic %s; fix the row, leave the column NULL, or add partitions",
				r.Partition, r.Topic)
		}
	}
	return nil
}

// partitioner is franz-go's default partitioner (which has no OnNewBatch, so
// neither has this: franz-go buffers without holding its partition lock) for every record but those with a
// preset partition, which go there: keyed records keep the key hash, so one
// aggregate keeps one partition.
func partitioner() kgo.Partitioner {
	return &presetPartitioner{kgo.UniformBytesPartitioner(64<<10, true, true, nil)}
}

type presetPartitioner struct{ fallback kgo.Partitioner }

func (p *presetPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return &presetTopicPartitioner{p.fallback.ForTopic(topic).(kgo.TopicBackupPartitioner)}
}

type presetTopicPartitioner struct{ fallback kgo.TopicBackupPartitioner }

func preset(r *kgo.Record) bool {
	switch r.Context.(type) {
	case *partitionMark, *badPartition:
		return true
	}
	return false
}

// RequiresConsistency: a preset record must be offered every partition, so that
// its number is an index into them.
func (p *presetTopicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return preset(r) || p.fallback.RequiresConsistency(r)
}

func (p *presetTopicPartitioner) Partition(r *kgo.Record, n int) int {
	return p.fallback.Partition(r, n)
}

func (p *presetTopicPartitioner) PartitionByBackup(r *kgo.Record, n int, backup kgo.TopicBackupIter) int {
	if !preset(r) {
		return p.fallback.PartitionByBackup(r, n, backup)
	}
	if r.Partition >= int32(n) {
		r.Context = outOfRangeMark // franz-go fails the record; the promise says why
	}
	return int(r.Partition)
}
