package consumer

import "github.com/twmb/franz-go/pkg/kgo"

// SetAfterDBCommit installs the test hook that runs after each record's transaction
// committed and before its offset is committed; an error from fn makes Run return
// it without committing any offset of the batch, as a crash at that point would.
func SetAfterDBCommit(cfg *Config, fn func(rec *kgo.Record, ran bool) error) {
	cfg.afterDBCommit = fn
}
