package poller

import (
	"errors"
	"fmt"
	"time"
)

// OnPublish says what happens to an outbox row once its event was published.
type OnPublish string

const (
	// Mark sets processed_at, in batched updates (the default).
	Mark OnPublish = "mark"
	// Delete deletes acked rows in batches.
	Delete OnPublish = "delete"
	// None leaves the table alone, for applications that delete the row in the
	// transaction that inserted it (Debezium style). Only the stream sees such rows.
	// walrelay never deletes in this mode: an event it hands over to the poller is
	// inserted again if its row is gone, and marked processed once the poller
	// publishes it, since the row may be one the application kept.
	None OnPublish = "none"
	// Progress leaves the stream's rows alone too, and instead records, once per
	// progress interval, a published horizon: an xid below which every transaction
	// was published (docs/design.md invariant 10). A row is then published when it is
	// marked or below the horizon; rows the poller or a catch-up pass publishes are
	// still marked one by one. Stream mode only, where it is the default.
	Progress OnPublish = "progress"
)

// ParseOnPublish checks a --on-publish value.
func ParseOnPublish(s string) (OnPublish, error) {
	switch o := OnPublish(s); o {
	case Mark, Delete, None, Progress:
		return o, nil
	}
	return "", fmt.Errorf("on-publish %q: want progress, mark, delete or none", s)
}

// Policy is the retry policy for events handed over to the poller.
type Policy struct {
	// MaxAttempts failed publishes make a row a dead letter.
	MaxAttempts int
	// BackoffMin and BackoffMax bound the exponential backoff between attempts; each
	// wait is jittered down by up to half so that retries spread out.
	BackoffMin time.Duration
	BackoffMax time.Duration
}

// DefaultPolicy: 10 attempts, 1s doubling up to 5 minutes.
func DefaultPolicy() Policy {
	return Policy{MaxAttempts: 10, BackoffMin: time.Second, BackoffMax: 5 * time.Minute}
}

// Validate checks the policy.
func (p Policy) Validate() error {
	var errs []error
	if p.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("max attempts must be at least 1, got %d", p.MaxAttempts))
	}
	if p.BackoffMin <= 0 || p.BackoffMax < p.BackoffMin {
		errs = append(errs, fmt.Errorf("retry backoff: want 0 < min <= max, got min %s, max %s", p.BackoffMin, p.BackoffMax))
	}
	return errors.Join(errs...)
}
