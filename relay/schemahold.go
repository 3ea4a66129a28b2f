package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/backoff"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// The registry converters write schema ids that only the registry gives
// (docs/design.md, "Schema registry"). Every id is resolved before the event
// reaches the sink, whose Publish never waits: the stream holds a message whose
// event needs an id not cached (replication.Held) while a goroutine asks the
// registry, so that reading pauses and status updates go on however long the
// registry is down; events whose ids are cached go on through an outage. A schema
// the registry refuses makes its events dead letters at their first attempt. The
// catch-up pass, the poller and replays resolve the same way through
// resolvingSink.

// schemaResolver asks the registry for ids and keeps what operators see of it:
// walrelay_schema_registry_up, the refused events, /readyz's reason.
type schemaResolver struct {
	f       record.Format // the sink's, sharing its Schemas
	reg     record.Registry
	log     *slog.Logger
	up      prometheus.Gauge
	refused *prometheus.CounterVec
	// down is why the registry is not answering, for /readyz; nil: it answers.
	down atomic.Pointer[string]
	// maxHold bounds a hold (exactly-once: within the Kafka transaction's
	// timeout); 0: none.
	maxHold time.Duration

	mu       sync.Mutex
	lastWarn time.Time
}

// newSchemaResolver is cfg's resolver, nil when no converter uses a registry.
func newSchemaResolver(cfg Config, log *slog.Logger, reg prometheus.Registerer) (*schemaResolver, error) {
	if cfg.Format == nil || cfg.SchemaRegistry == nil ||
		!cfg.Format.KeyConverter.Registered() && !cfg.Format.ValueConverter.Registered() {
		return nil, nil
	}
	if cfg.Format.Schemas == nil {
		return nil, record.ErrNoSchemas
	}
	r := &schemaResolver{f: *cfg.Format, reg: cfg.SchemaRegistry, log: log,
		up: prometheus.NewGauge(prometheus.GaugeOpts{Name: "walrelay_schema_registry_up",
			Help: "1 when the schema registry answered the relay's last call (or none was needed yet), 0 while it does not."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "walrelay_schema_refused_events_total",
			Help: "Events dead-lettered because the schema registry refused their schema (409, 422), by subject."}, []string{"subject"}),
	}
	if cfg.Delivery == ExactlyOnce {
		r.maxHold = exactlyOnceMaxHold
	}
	r.up.Set(1)
	for _, c := range []prometheus.Collector{r.up, r.refused} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register schema registry metrics: %w", err)
		}
	}
	return r, nil
}

// exactlyOnceMaxHold is below the Kafka transaction timeout (sink/kafka,
// transactional.go: one minute), so that a hold ends the session, aborting the
// open transaction, before the broker expires it.
const exactlyOnceMaxHold = 45 * time.Second

// resolve asks the registry for need's id and caches it. A *record.RefusedError
// is the registry's refusal; any other error means it did not answer.
func (r *schemaResolver) resolve(ctx context.Context, need record.SchemaNeed) error {
	var err error
	if need.Native {
		err = r.fetchNative(ctx, need)
	} else {
		var id int32
		if id, err = r.reg.Resolve(ctx, need); err == nil {
			r.f.Schemas.Store(need.Subject, need.Schema, id)
		}
	}
	var refused *record.RefusedError
	switch {
	case err == nil:
	case errors.As(err, &refused):
	default:
		if ctx.Err() != nil {
			return err
		}
		why := fmt.Sprintf("schema registry not answering for subject %s: %v", need.Subject, err)
		r.down.Store(&why)
		r.up.Set(0)
		r.mu.Lock()
		warn := time.Since(r.lastWarn) >= 30*time.Second
		if warn {
			r.lastWarn = time.Now()
		}
		r.mu.Unlock()
		if warn {
			r.log.Warn("schema registry does not answer: events that need this subject's schema wait, reading is paused "+
				"with the slot kept alive; check schema-registry-url and that the registry is up", "subject", need.Subject, "err", err)
		}
		return err
	}
	if r.down.Swap(nil) != nil {
		r.log.Info("schema registry answers again", "subject", need.Subject)
	}
	r.up.Set(1)
	return err
}

// fetchNative fetches and caches the schema a native payload was written with
// (record.NativePayload); a schema that cannot serve is a refusal.
func (r *schemaResolver) fetchNative(ctx context.Context, need record.SchemaNeed) error {
	nr, ok := r.reg.(record.NativeRegistry)
	if !ok {
		return &record.RefusedError{Subject: need.Subject, Message: "this registry client cannot fetch schemas for native payloads"}
	}
	fs, err := nr.Fetch(ctx, need)
	if err != nil {
		return err
	}
	return r.f.Schemas.StoreNative(need, fs)
}

// eventError makes a refusal or an event the converters cannot write an event
// error no retry fixes (a dead letter at its first attempt), counting refusals.
func (r *schemaResolver) eventError(err error) error {
	var refused *record.RefusedError
	if errors.As(err, &refused) {
		r.refused.WithLabelValues(refused.Subject).Inc()
	}
	return &sink.EventError{Err: err, Final: true}
}

// schemaHold is the stream's side: it holds a message while the ids its event
// needs are resolved.
type schemaHold struct {
	r     *schemaResolver
	gate  replication.Pause // paused while a resolution runs
	needs []record.SchemaNeed
	since time.Time // when the held event was first held; zero: none is

	mu      sync.Mutex
	refused map[[2]string]error // the last resolution's refusals, by subject and schema, taken once
}

// check says what to do with ev before it is published: a nil verdict and err
// publish it; a verdict is an event error that makes it a dead letter; err
// (*replication.Held, or the end of the session) goes back to the stream.
func (h *schemaHold) check(ctx context.Context, ev *outbox.Event) (verdict, err error) {
	needs, err := h.r.f.Needs(ev, h.needs[:0])
	h.needs = needs[:0]
	var unwritable *record.UnwritableError
	if errors.As(err, &unwritable) {
		return h.r.eventError(err), nil
	}
	if err != nil {
		return nil, err
	}
	if len(needs) == 0 {
		h.since = time.Time{}
		return nil, nil
	}
	h.mu.Lock()
	for _, n := range needs {
		k := [2]string{n.Subject, n.Schema}
		if refusal := h.refused[k]; refusal != nil {
			delete(h.refused, k)
			h.mu.Unlock()
			h.since = time.Time{}
			return h.r.eventError(refusal), nil
		}
	}
	h.mu.Unlock()
	now := time.Now()
	if h.since.IsZero() {
		h.since = now
	} else if h.r.maxHold > 0 && now.Sub(h.since) >= h.r.maxHold {
		h.since = time.Time{}
		return nil, fmt.Errorf("the schema registry gave no id for subject %s within %s, inside the Kafka transaction timeout: "+
			"ending the session so that its open transaction is aborted rather than expired; it streams again from the "+
			"confirmed position once the registry answers", needs[0].Subject, h.r.maxHold)
	}
	h.gate.Pause()
	go h.resolveAll(ctx, slices.Clone(needs), h.since)
	return nil, &replication.Held{Until: &h.gate}
}

// resolveAll resolves needs, retrying while the registry does not answer, then lets
// the stream hand the held message again.
func (h *schemaHold) resolveAll(ctx context.Context, needs []record.SchemaNeed, since time.Time) {
	defer h.gate.Resume()
	retry := backoff.New(100*time.Millisecond, 5*time.Second)
	for _, n := range needs {
		for {
			err := h.r.resolve(ctx, n)
			var refused *record.RefusedError
			if err == nil {
				break
			}
			if errors.As(err, &refused) {
				h.mu.Lock()
				if h.refused == nil {
					h.refused = make(map[[2]string]error)
				}
				h.refused[[2]string{n.Subject, n.Schema}] = err
				h.mu.Unlock()
				return
			}
			if h.r.maxHold > 0 && time.Since(since) >= h.r.maxHold {
				return // check ends the session
			}
			if !backoff.Sleep(ctx, backoff.Jitter(retry.Next())) {
				return
			}
		}
	}
}
