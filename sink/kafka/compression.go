package kafka

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultCompression, measured against the others in BENCHMARKS.md: lz4 cost the
// relay as much CPU, zstd more, and snappy kept the lowest peak memory.
const DefaultCompression = "snappy"

// compression returns the producer option for a codec name.
func compression(name string) (kgo.Opt, error) {
	var codec kgo.CompressionCodec
	switch name {
	case "", "snappy":
		codec = kgo.SnappyCompression()
	case "lz4":
		return kgo.WithCompressor(&lz4Compressor{}), nil
	case "none":
		codec = kgo.NoCompression()
	case "zstd":
		codec = kgo.ZstdCompression()
	case "gzip":
		codec = kgo.GzipCompression()
	default:
		return nil, fmt.Errorf("kafka: unknown compression %q (want none, snappy, lz4, zstd or gzip)", name)
	}
	// NoCompression after the codec: franz-go falls back to it for brokers too old for the codec.
	return kgo.ProducerBatchCompression(codec, kgo.NoCompression()), nil
}

// CheckCompression reports whether name is a compression this sink knows.
func CheckCompression(name string) error {
	_, err := compression(name)
	return err
}

// lz4Compressor is lz4 with 64 KiB blocks. franz-go's own uses lz4's default 4 MiB
// blocks, each batch compressed holding a 4 MiB buffer: peak RSS in a backlog drain
// rose by 17 MiB, for batches that are a few dozen KiB.
type lz4Compressor struct{ writers sync.Pool }

func (c *lz4Compressor) Compress(dst *bytes.Buffer, src []byte, _ ...kgo.CompressFlag) ([]byte, kgo.CompressionCodecType) {
	w, _ := c.writers.Get().(*lz4.Writer)
	if w == nil {
		w = lz4.NewWriter(nil)
		if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
			return nil, kgo.CodecError
		}
	}
	defer c.writers.Put(w)
	w.Reset(dst)
	if _, err := w.Write(src); err != nil {
		return nil, kgo.CodecError
	}
	if err := w.Close(); err != nil {
		return nil, kgo.CodecError
	}
	return dst.Bytes(), kgo.CodecLz4
}
