package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/walrelay/walrelay/internal/backoff"
)

// Handler applies one record's effects with tx, the transaction that also records
// the record's event id. It must write every effect through tx and must not commit
// or roll it back.
type Handler func(ctx context.Context, tx pgx.Tx, rec *kgo.Record) error

// Defaults for the zero values of Config.
const (
	DefaultMaxAttempts    = 5
	DefaultRetryMin       = 100 * time.Millisecond
	DefaultRetryMax       = 5 * time.Second
	DefaultMaxPollRecords = 100
)

// Config is a consumer loop for Run. Zero values take the defaults above.
type Config struct {
	// DB runs one transaction per record. Required.
	DB *pgxpool.Pool
	// Client is the caller's group consumer, created with kgo.ConsumerGroup,
	// kgo.ConsumeTopics and kgo.DisableAutoCommit (Run commits offsets itself).
	// kgo.BlockRebalanceOnPoll is recommended: Run allows rebalances after each
	// batch's commit, so it never commits offsets of partitions it no longer owns.
	// The caller closes it (CloseAllowingRebalance with BlockRebalanceOnPoll).
	// Required.
	Client *kgo.Client
	// Handle applies a record's effects. Required.
	Handle Handler
	// Logger gets retries, commit failures and duplicates; nil discards.
	Logger *slog.Logger
	// Table is the dedup table; empty means DefaultTable.
	Table string
	// MaxAttempts is how often a record is tried before Run returns its error.
	MaxAttempts int
	// RetryMin and RetryMax bound the exponential backoff between attempts.
	RetryMin, RetryMax time.Duration
	// MaxPollRecords bounds one batch: records are processed, then their offsets
	// committed, a batch at a time.
	MaxPollRecords int
	// TracerProvider starts a consumer span per record, a child of the trace
	// context in its headers, covering its attempts until its transaction
	// committed; the Handler's ctx carries it. nil: the global provider (a no-op
	// until the application sets one).
	TracerProvider trace.TracerProvider
	// Propagator reads the trace context from the record's headers; nil: the
	// global propagator as Run starts, when it reads traceparent, else W3C Trace
	// Context.
	Propagator propagation.TextMapPropagator

	// afterDBCommit, set only by tests, runs after a record's transaction committed
	// and before its offset is committed; an error makes Run return it at once
	// without committing any offset of the batch, as if the process died there.
	afterDBCommit func(rec *kgo.Record, ran bool) error
}

// Validate reports what is missing or out of range, before Run polls.
func (c *Config) Validate() error {
	var errs []error
	if c.DB == nil {
		errs = append(errs, errors.New("consumer config: DB is required (a *pgxpool.Pool for the database holding the dedup table)"))
	}
	if c.Client == nil {
		errs = append(errs, errors.New("consumer config: Client is required (a kgo.Client with ConsumerGroup, ConsumeTopics and DisableAutoCommit)"))
	}
	if c.Handle == nil {
		errs = append(errs, errors.New("consumer config: Handle is required"))
	}
	if c.MaxAttempts < 0 || c.MaxPollRecords < 0 || c.RetryMin < 0 || c.RetryMax < 0 {
		errs = append(errs, errors.New("consumer config: MaxAttempts, MaxPollRecords, RetryMin and RetryMax must not be negative (zero means the default)"))
	}
	if c.RetryMin > 0 && c.RetryMax > 0 && c.RetryMin > c.RetryMax {
		errs = append(errs, fmt.Errorf("consumer config: RetryMin %s is above RetryMax %s", c.RetryMin, c.RetryMax))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.RetryMin == 0 {
		c.RetryMin = DefaultRetryMin
	}
	if c.RetryMax == 0 {
		c.RetryMax = max(DefaultRetryMax, c.RetryMin)
	}
	if c.MaxPollRecords == 0 {
		c.MaxPollRecords = DefaultMaxPollRecords
	}
	return c
}

// RecordError is the error Run returns for a record it could not process. Its
// offset was not committed.
type RecordError struct {
	Record   *kgo.Record
	EventID  string
	Attempts int
	Err      error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("process record %s[%d]@%d (event id %q) after %d attempt(s): %v; its offset is not committed: "+
		"fix the cause and restart with a new client to re-deliver it, or commit its offset to skip it",
		e.Record.Topic, e.Record.Partition, e.Record.Offset, e.EventID, e.Attempts, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// Run consumes until ctx is cancelled (it returns nil then) or a record fails for
// good. For each record, in order, it begins a transaction on DB, records the
// record's event id (its "id" header) through Dedup.Once and runs Handle in the same
// transaction, and commits it; a duplicate commits without running Handle. After a
// batch, it commits the offsets of the records whose transactions committed: never
// before, so a crash in between re-delivers records whose effects are already
// recorded, and Once turns them into no-ops.
//
// A failing record (Handle, the dedup insert or the commit) is retried in a new
// transaction up to MaxAttempts times, with exponential backoff and jitter between
// RetryMin and RetryMax; then Run commits the offsets of the records before it and
// returns a *RecordError. A record without a valid "id" header is not retried: its
// RecordError wraps ErrInvalidEventID. The client is then positioned after the
// failed record, so close it; a new one in the group resumes at the committed
// offset and gets the record again. To skip it instead, commit it with
// Client.CommitRecords(ctx, recErr.Record) before closing.
//
// An offset commit that fails is logged and not retried: the records stay
// uncommitted and are re-delivered later as duplicates, which is safe.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	l := &loop{cfg: cfg, dedup: Dedup{Table: cfg.Table}, tracing: newTracing(cfg.TracerProvider, cfg.Propagator)}
	cl := cfg.Client
	defer cl.AllowRebalance()
	for {
		fetches := cl.PollRecords(ctx, cfg.MaxPollRecords)
		if ctx.Err() != nil {
			return nil
		}
		if fetches.IsClientClosed() {
			return errors.New("consume: the kafka client was closed while Run was polling; cancel Run's context before closing the client")
		}
		var fetchErr error
		fetches.EachError(func(topic string, partition int32, err error) {
			fetchErr = err
			cfg.Logger.Warn("fetch failed; the client retries", "topic", topic, "partition", partition, "err", err)
		})

		done, err := l.process(ctx, fetches)
		if len(done) > 0 {
			// Commit even when ctx was cancelled mid-batch: these records' effects
			// are committed, and a commit now saves re-delivering them.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if cerr := cl.CommitRecords(cctx, done...); cerr != nil {
				cfg.Logger.Warn("commit offsets failed; the records will be re-delivered and skipped as duplicates",
					"records", len(done), "err", cerr)
			}
			cancel()
		}
		cl.AllowRebalance()
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		if fetchErr != nil && fetches.NumRecords() == 0 {
			// Do not spin on a persistent fetch error.
			if !backoff.Sleep(ctx, cfg.RetryMin) {
				return nil
			}
		}
	}
}

type loop struct {
	cfg     Config
	dedup   Dedup
	tracing tracing
}

// process handles the records in order and returns those whose transactions
// committed. It stops at the first record that fails for good (returning its
// error) or when ctx is cancelled (returning no error).
func (l *loop) process(ctx context.Context, fetches kgo.Fetches) ([]*kgo.Record, error) {
	var done []*kgo.Record
	for rec := range fetches.RecordsAll() {
		ran, err := l.record(ctx, rec)
		if err != nil {
			if ctx.Err() != nil {
				return done, nil
			}
			return done, err
		}
		if l.cfg.afterDBCommit != nil {
			if err := l.cfg.afterDBCommit(rec, ran); err != nil {
				return nil, err
			}
		}
		done = append(done, rec)
	}
	return done, nil
}

// record processes one record, retrying with backoff, in its consumer span.
func (l *loop) record(ctx context.Context, rec *kgo.Record) (bool, error) {
	id := header(rec, "id")
	ctx, span := l.tracing.start(ctx, rec, id)
	ran, err := l.attempts(ctx, rec, id)
	end(span, ran, err)
	return ran, err
}

// attempts tries rec until it committed, failed for good or ctx ended.
func (l *loop) attempts(ctx context.Context, rec *kgo.Record, id string) (bool, error) {
	log := l.cfg.Logger.With("event_id", id, "event_type", header(rec, "event_type"),
		"aggregate_id", header(rec, "aggregate_id"), "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset)
	if id == "" {
		return false, &RecordError{Record: rec, Attempts: 1,
			Err: fmt.Errorf("%w: the record has no \"id\" header; walrelay sets it to the outbox row's UUID, "+
				"so this record was not published by walrelay", ErrInvalidEventID)}
	}
	retry := backoff.New(l.cfg.RetryMin, l.cfg.RetryMax)
	for attempt := 1; ; attempt++ {
		ran, err := l.once(ctx, id, rec)
		if err == nil {
			if !ran {
				log.Debug("duplicate event skipped")
			}
			return ran, nil
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if errors.Is(err, ErrInvalidEventID) || attempt >= l.cfg.MaxAttempts {
			return false, &RecordError{Record: rec, EventID: id, Attempts: attempt, Err: err}
		}
		wait := retry.Next()
		log.Warn("handle event failed; retrying", "attempt", attempt, "retry_in", wait, "err", err)
		if !backoff.Sleep(ctx, wait) {
			return false, ctx.Err()
		}
	}
}

// once runs one attempt in its own transaction.
func (l *loop) once(ctx context.Context, id string, rec *kgo.Record) (bool, error) {
	tx, err := l.cfg.DB.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx) // a no-op after Commit
	}()
	ran, err := l.dedup.Once(ctx, tx, id, func(ctx context.Context) error {
		return l.cfg.Handle(ctx, tx, rec)
	})
	if err != nil {
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("commit: %w", err)
	}
	return ran, nil
}

func header(rec *kgo.Record, key string) string {
	for _, h := range rec.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
