package relay

import (
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// What serves a relay over HTTP (package admin) and what works beside it (package
// ops) read of a running relay: these methods, never its fields. Each is safe to
// call from any goroutine while Run runs. Ready, Pause, Resume and Paused are the
// rest of this surface (ready.go, pause.go).

// Config is the relay's configuration as New accepted it (broker addresses
// redacted, OnPublish resolved).
func (r *Relay) Config() Config { return r.cfg }

// Logger is the relay's logger.
func (r *Relay) Logger() *slog.Logger { return r.log }

// Registerer is where the relay's metrics are registered.
func (r *Relay) Registerer() prometheus.Registerer { return r.registerer }

// Gatherer gathers the relay's metrics: what /metrics serves. Nil when
// Config.Registry cannot be gathered and no Config.Gatherer is set.
func (r *Relay) Gatherer() prometheus.Gatherer { return r.gatherer }

// Standby reports whether the relay waits for another instance to release its slot.
func (r *Relay) Standby() bool { return r.standby.Load() }

// EventsConfirmedAt is when the relay's confirmed LSN last moved past a transaction
// with events (walrelay_events_confirmed_timestamp_seconds); nil: not since it
// started.
func (r *Relay) EventsConfirmedAt() *time.Time { return r.eventsConfirmedAt.Load() }

// Pool is the relay's connection pool on the database its bookkeeping lives in
// (the primary when the slot is on a standby); nil until Run connected.
func (r *Relay) Pool() *pgxpool.Pool { return r.sharedPool.Load() }

// Sink is the broker client the relay publishes through (Config.Sink): a replay
// started beside the relay shares it.
func (r *Relay) Sink() sink.Sink { return r.cfg.Sink }

// PauseGate is the relay's pause: work done beside the relay that publishes (a
// replay) waits on it, so that a paused relay publishes nothing.
func (r *Relay) PauseGate() *replication.Pause { return &r.pause }

// TableStore is one outbox table's books: its schema-qualified name and the store
// its dead letters are listed, retried and purged through.
type TableStore struct {
	Name  string
	Store *poller.Store
}

// Stores are the books of the relay's outbox tables, in Config's order, once Run
// has checked the tables; nil before.
func (r *Relay) Stores() []TableStore {
	if s := r.tableStores.Load(); s != nil {
		return *s
	}
	return nil
}

// Published is how the relay's sink makes records of events (Config.Published).
type Published struct {
	// Sink is the broker's kind: kafka, nats, rabbitmq, redis, sqs, pubsub or http.
	Sink string
	// TopicTemplate is the sink's topic (subject, stream, queue) template, for the
	// tables that set none of their own; empty where the sink names its destination
	// otherwise (RabbitMQ, HTTP).
	TopicTemplate string
	// Format makes an event's key, value and headers.
	Format record.Format
}

// Stalled reports whether slot lag grows while the confirmed LSN stands still
// (walrelay_stalled).
func (r *Relay) Stalled() bool { return r.stalled.Load() }

// BrokerDown is why the broker does not acknowledge, and "" while it does.
func (r *Relay) BrokerDown() string {
	if why := r.brokerDown.Load(); why != nil {
		return strings.TrimSpace(*why)
	}
	return ""
}
