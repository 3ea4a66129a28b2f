package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/internal/backoff"
	"github.com/walrelay/walrelay/internal/redact"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// Relay publishes every committed outbox row to the broker. Build it with New and
// run it with Run; it is not reusable after Run returns.
type Relay struct {
	cfg        Config
	log        *slog.Logger
	window     *replication.Window
	metrics    *metrics
	registerer prometheus.Registerer
	gatherer   prometheus.Gatherer

	active         atomic.Bool // streaming, or the last poll succeeded
	stalled        atomic.Bool
	brokerDown     atomic.Pointer[string] // why the broker is not acknowledging (brokerwatch.go); nil: it is
	acks           *ackClock              // events handed to the sink and not answered yet
	standby        atomic.Bool            // waiting for another instance to release the slot
	lostLeadership atomic.Bool            // the last replication session ended because the lock's connection died
	eoHandOver     sync.Map               // exactly-once: sink.EventKey of events that poisoned a Kafka transaction
	pause          replication.Pause
	pauseNote      atomic.Pointer[pauseNote]    // the last pause's time and reason (pause.go)
	tableStores    atomic.Pointer[[]TableStore] // set once the tables are checked: Stores, for the admin API's /dlq
	// eventsConfirmedAt is walrelay_events_confirmed_timestamp_seconds, for GET /status.
	eventsConfirmedAt atomic.Pointer[time.Time]
	// samples are the console's charts: one per stats pass (samples.go).
	samples *sampleRing

	// tables are the outbox tables, their shapes read by checkTable at the start of
	// Run; shape is the first one's.
	tables []table
	shape  catalog.Shape
	// stores keep the books of the tables, by name (table.name).
	stores map[string]*poller.Store
	pool   *pgxpool.Pool // opened by Run, on Config.booksURL
	// sharedPool is pool for Pool, which is read from other goroutines.
	sharedPool atomic.Pointer[pgxpool.Pool]
	// onStandby: the slot is on a hot standby, the bookkeeping on Config.PrimaryURL
	// (checkStandby, before the pool opens; decodingServer, before each session, when
	// --database-url names several servers).
	onStandby bool
	// target is where the session's lock, slot and replication connection go:
	// Config.DatabaseURL, or the one of its servers decodingServer chose (pair.go).
	target string
	// servers are --database-url's servers when it names several (pair.go), with
	// its target_session_attrs as followPrimary and the check it implies.
	servers        []server
	followPrimary  bool
	urlCheck       pgconn.ValidateConnectFunc
	waiting        atomic.Pointer[string] // why no session can start yet (decodingServer); nil: none
	feedbackWarned bool
}

// table is one outbox table the relay streams.
type table struct {
	TableConfig
	shape catalog.Shape
	name  string        // shape.Qualified(), which its events carry (outbox.Event.Table)
	route *record.Route // TopicRegex, parsed; nil without one
}

// label marks an event as the table's: bookkeeping and topic template follow it.
func (t *table) label(ev *outbox.Event) {
	ev.Table, ev.TopicTemplate = t.name, t.topicOf(ev)
}

// topicOf is the topic template ev carries: the table's, or the topic its route
// names, which has no placeholders.
func (t *table) topicOf(ev *outbox.Event) string {
	if t.route != nil {
		return t.route.Topic(ev.AggregateType)
	}
	return t.TopicTemplate
}

// New validates cfg and returns a relay. It opens no connection.
func New(cfg Config) (*Relay, error) {
	if err := errors.Join(cfg.Validate(), cfg.checkSink()); err != nil {
		return nil, err
	}
	cfg.OnPublish = cfg.OnPublishMode()
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	reg, gatherer := cfg.Registry, cfg.Gatherer
	if reg == nil {
		own := newRegistry()
		reg, gatherer = own, own
	}
	if g, ok := reg.(prometheus.Gatherer); ok && gatherer == nil {
		gatherer = g
	}
	cfg.BrokerAddrs = redact.URLs(cfg.BrokerAddrs) // shown in logs and on /readyz, which asks for no token
	r := &Relay{
		cfg:        cfg,
		log:        logger,
		window:     replication.NewWindow(int64(cfg.MaxInFlightEvents), cfg.MaxInFlightBytes),
		acks:       newAckClock(time.Now()),
		target:     cfg.DatabaseURL,
		registerer: reg,
		gatherer:   gatherer,
		samples:    newSampleRing(cfg.StatsInterval),
	}
	m, err := newMetrics(reg, r)
	if err != nil {
		return nil, err
	}
	r.metrics = m
	if cfg.StartPaused {
		r.PauseBecause("--start-paused")
	}
	return r, nil
}

// Run relays until ctx ends, reconnecting with capped backoff after failures that
// retrying can fix (server restarts, terminated walsenders, network errors, a slot
// held by another process). It returns nil after a graceful stop, and an error when
// the setup is wrong (see catalog.SetupError) or the broker client cannot be built.
func (r *Relay) Run(ctx context.Context) error {
	snk := r.cfg.Sink
	if r.cfg.Mode == ModeStream {
		if err := r.checkStandby(ctx); err != nil || ctx.Err() != nil {
			return err
		}
	}
	pool, err := r.openPool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	r.pool = pool
	r.sharedPool.Store(pool)

	g, gctx := errgroup.WithContext(ctx)
	if r.pause.Paused() {
		r.log.Info("starting paused (--start-paused): nothing is read or published until resumed (walrelay resume, POST /resume)")
	}
	if err := r.waitForBroker(ctx, snk); err != nil {
		return g.Wait() // ctx ended while waiting
	}
	if r.cfg.AckTimeout > 0 {
		var verdicts chan probeVerdict // nil: no probe
		if r.cfg.BrokerProbeInterval > 0 {
			verdicts = make(chan probeVerdict)
			g.Go(func() error { return r.probeBroker(gctx, verdicts) })
		}
		g.Go(func() error { return r.watchBroker(gctx, verdicts) })
	}

	// The table is checked before anything else starts, so a missing table is one
	// clear error rather than a chorus of failing background loops. Its shape, read
	// once, is what every statement is built from.
	if err := r.checkTable(ctx, pool); err != nil || ctx.Err() != nil {
		return err
	}
	if err := checkSchema(ctx, pool); err != nil {
		return err
	}
	if err := r.checkPrivileges(ctx, pool); err != nil {
		return err
	}

	// The bookkeeper outlives the stream so that a stopping stream can still settle
	// what was acked; it stops last.
	stores := make([]*poller.Store, len(r.tables))
	for i, t := range r.tables {
		stores[i] = poller.NewStore(pool, t.shape, r.cfg.Retry)
	}
	r.stores = make(map[string]*poller.Store, len(stores))
	books := make([]TableStore, len(r.tables))
	for i, t := range r.tables {
		r.stores[t.name] = stores[i]
		books[i] = TableStore{Name: t.name, Store: stores[i]}
	}
	r.tableStores.Store(&books)
	bk := poller.NewBookkeeperTables(stores, r.cfg.OnPublish, 50*time.Millisecond, r.log)
	bk.OnFlush = func(d time.Duration) { r.metrics.batchDuration.Observe(d.Seconds()) }
	bk.OnDeadLetter = r.countDeadLetter
	bk.Lag = r.cfg.bookkeepingLag
	bkCtx, stopBookkeeper := context.WithCancel(context.Background())
	bkDone := make(chan struct{})
	go func() { _ = bk.Run(bkCtx); close(bkDone) }()
	defer func() { stopBookkeeper(); <-bkDone }()
	// The slot's health is read where the slot is: on the standby, or where a
	// --database-url that names several servers lands. Decided before the stream
	// starts, which sets onStandby per session when the URL names several.
	slotPool := pool
	if r.onStandby || (len(r.servers) > 1 && !r.followPrimary) {
		if slotPool, err = r.openPoolOn(ctx, r.cfg.DatabaseURL); err != nil {
			return err
		}
		defer slotPool.Close()
	}
	if r.cfg.Mode == ModePoll {
		r.metrics.leader.Set(1)
		r.log.Info("polling", "tables", r.tableNames(), "batch_size", r.cfg.PollBatchSize, "workers", r.cfg.PollWorkers,
			"interval", r.cfg.PollInterval.String())
	} else {
		g.Go(func() error { return r.stream(gctx, snk, bk) })
		if r.cfg.HeartbeatInterval > 0 {
			g.Go(func() error { return r.heartbeat(gctx, pool) })
		}
	}
	g.Go(func() error { return r.stats(gctx, pool, slotPool) })
	pollers := make([]*poller.Poller, len(r.tables))
	for i := range r.tables {
		pollers[i] = r.newPoller(pool, snk, &r.tables[i])
	}
	if r.cfg.Mode != ModePoll {
		// The stream's slow path has work only after a hand-over (or a redrive, which
		// an idle poller finds within streamPollIdleMax).
		bk.OnHandOver = func() {
			for _, pl := range pollers {
				pl.Wake()
			}
		}
	}
	for i := range r.tables {
		pl := pollers[i]
		g.Go(func() error { return pl.Run(gctx) })
		if (r.cfg.OnPublish == poller.Mark || r.cfg.OnPublish == poller.Progress) && r.cfg.Retention > 0 {
			g.Go(func() error { return r.cleanup(gctx, stores[i]) })
		}
	}
	return g.Wait()
}

// openPool opens the pool for bookkeeping, polling and stats: on the primary when
// the slot is on a standby, since all of it writes or must not lag.
func (r *Relay) openPool(ctx context.Context) (*pgxpool.Pool, error) {
	return r.openPoolOn(ctx, r.cfg.booksURL())
}

// openPoolOn is openPool on url.
func (r *Relay) openPoolOn(ctx context.Context, url string) (*pgxpool.Pool, error) {
	poolCfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, errorf("database pool", redact.Error(err, url))
	}
	// Bookkeeping statements are prepared once and run for ever: a generic plan made
	// while the outbox was tiny (a sequential scan) would stay as it grows. Custom
	// plans keep the primary-key lookups.
	poolCfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	replication.RenderLikeStream(poolCfg.ConnConfig.RuntimeParams) // placed columns read as the stream sends them
	replication.TuneKeepalives(&poolCfg.ConnConfig.Config)         // a silent network fails bookkeeping in seconds, not hours
	// Each table's poller holds a connection per worker while it polls, and in poll
	// mode another for LISTEN: with several tables or workers the default pool (4 or
	// the CPU count) could leave the bookkeeping waiting. A pool_max_conns in the URL
	// is left as it is.
	workers := r.cfg.pollWorkers()
	if n := len(r.cfg.OutboxTables()); (n > 1 || workers > 1) && !strings.Contains(url, "pool_max_conns") {
		poolCfg.MaxConns = max(poolCfg.MaxConns, int32((workers+1)*n+3))
	}
	if r.cfg.DatabasePassword != nil {
		poolCfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
			return r.cfg.setPassword(ctx, &cc.Config)
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, errorf("database pool", err)
	}
	return pool, nil
}

// streamPollIdleMax is how long the stream's slow path may wait between polls that
// find nothing: hand-overs wake it, so only rows made due from outside (a redrive of
// dead letters) wait that long. A poll-only relay keeps its interval.
func streamPollIdleMax(pollMode bool) time.Duration {
	if pollMode {
		return 0
	}
	return 10 * time.Second
}

// newPoller builds the poller: the stream's slow path, or the whole relay in poll
// mode, where its batches say whether the relay is active.
func (r *Relay) newPoller(pool *pgxpool.Pool, snk sink.Sink, t *table) *poller.Poller {
	pollMode := r.cfg.Mode == ModePoll
	return poller.New(pool, r.pollerSink(snk), poller.Config{
		Shape: t.shape, TopicTemplate: t.TopicTemplate, Topic: t.topicOf, Table: t.name, PollOnly: pollMode, OnPublish: r.cfg.OnPublish, Policy: r.cfg.Retry,
		BatchSize: r.cfg.PollBatchSize, Workers: r.cfg.pollWorkers(), Interval: r.cfg.PollInterval, PublishTimeout: r.cfg.PublishTimeout,
		IdleMax: streamPollIdleMax(pollMode),
		Logger:  r.log, OnDeadLetter: r.countDeadLetter,
		OnBatch: func(res poller.BatchResult) {
			if pollMode {
				r.active.Store(true)
			}
			r.metrics.published.Add(float64(res.Published))
			for _, et := range res.FailedEventTypes {
				r.metrics.failed.WithLabelValues(et).Inc()
			}
			if res.Published+len(res.FailedEventTypes) > 0 {
				r.metrics.batchDuration.Observe(res.Duration.Seconds())
			}
		},
		OnError: func(error) {
			if pollMode {
				r.active.Store(false)
			}
		},
		Paused: r.pause.Paused,
	})
}

// countDeadLetter counts an event given up on (poller.DeadLettered, logged there).
func (r *Relay) countDeadLetter(d poller.DeadLettered) {
	r.metrics.deadLettered.WithLabelValues(d.Table).Inc()
}

// stream leads the slot and runs replication sessions until ctx ends or the setup
// proves wrong. One instance per slot streams: the others wait as standbys.
func (r *Relay) stream(ctx context.Context, snk sink.Sink, bk *poller.Bookkeeper) error {
	retry := backoff.New(r.cfg.ReconnectMin, r.cfg.ReconnectMax)
	for {
		if err := r.decodingServer(ctx); err != nil {
			return err
		}
		lock, err := r.acquireLeadership(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var sessionErr error
		started := time.Now()
		if err != nil {
			sessionErr = errorf("take leadership", err)
		} else {
			r.standby.Store(false)
			leadCtx, stopWatch := r.holdLeadership(ctx, lock)
			sessionErr = r.session(leadCtx, snk, bk)
			stopWatch()
			lock.Close(context.Background()) // releases the advisory lock
		}
		if ctx.Err() != nil {
			if sessionErr != nil {
				r.log.Warn("stopped while the session was failing", "err", sessionErr)
			}
			return nil
		}
		if r.lostLeadership.Swap(false) {
			// Give the standbys, which try every leaderCheckInterval, the first chance.
			if !backoff.Sleep(ctx, 2*leaderCheckInterval) {
				return nil
			}
			continue
		}
		if sessionErr == nil {
			sessionErr = errors.New("replication session ended unexpectedly")
		}
		if permanent(sessionErr) {
			return sessionErr
		}
		r.metrics.reconnects.Inc()
		if time.Since(started) > time.Minute {
			retry.Reset()
		}
		wait := retry.Next()
		if slotBusy(sessionErr) {
			r.log.Warn("replication slot is in use by another process; waiting for it to be released "+
				"(a walrelay without leadership, or another client, streams it)",
				"slot", r.cfg.Slot, "err", sessionErr, "retry_in", wait.Round(time.Millisecond).String())
		} else {
			r.log.Error("replication session failed; reconnecting", "err", sessionErr, "retry_in", wait.Round(time.Millisecond).String())
		}
		if !backoff.Sleep(ctx, wait) {
			return nil
		}
	}
}

// heartbeatPrefix is the heartbeat message's prefix, never an event's.
const heartbeatPrefix = "walrelay"

// heartbeat writes a transactional logical message while nothing is in flight, so
// that the server has something to stream and the slot advances.
func (r *Relay) heartbeat(ctx context.Context, pool *pgxpool.Pool) error {
	ticker := time.NewTicker(r.cfg.HeartbeatInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		if events, _ := r.window.InFlight(); events > 0 {
			continue
		}
		if _, err := pool.Exec(ctx, "SELECT pg_logical_emit_message(true, '"+heartbeatPrefix+"', 'heartbeat')"); err != nil && ctx.Err() == nil {
			r.log.Warn("heartbeat failed", "err", err)
		}
	}
}

// retireBatch is how many published rows one statement of the progress mode's
// retirement deletes: large, since nothing but the horizon decides.
const retireBatch = 10000

// cleanup deletes processed rows older than the retention, in small batches, and
// with --on-publish progress the published ones too, in large batches.
func (r *Relay) cleanup(ctx context.Context, store *poller.Store) error {
	ticker := time.NewTicker(time.Minute)
	defer ticker.Stop()
	retire := r.cfg.OnPublish == poller.Progress
	for {
		n, err := store.DeleteProcessed(ctx, r.cfg.Retention, 1000)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			r.log.Warn("cleanup of processed rows failed; will try again", "err", err)
		case n > 0:
			r.log.Info("deleted processed rows past retention", "rows", n, "retention", r.cfg.Retention.String())
		}
		if retire {
			n, err := store.DeletePublished(ctx, r.cfg.Retention, retireBatch)
			switch {
			case ctx.Err() != nil:
				return nil
			case errors.Is(err, poller.ErrNoCreationTime):
				r.log.Warn("not retiring published rows past retention", "err", err)
				retire = false
			case err != nil:
				r.log.Warn("retiring published rows failed; will try again", "err", err)
			case n > 0:
				r.log.Info("deleted published rows past retention", "rows", n, "retention", r.cfg.Retention.String())
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// waitForBroker pings the broker until it answers, so a wrong address is reported
// at once and clearly rather than as a window that never drains.
func (r *Relay) waitForBroker(ctx context.Context, snk sink.Sink) error {
	retry := backoff.New(r.cfg.ReconnectMin, r.cfg.ReconnectMax)
	for {
		pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := snk.Ping(pingCtx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := retry.Next()
		r.log.Error("broker unreachable; check the broker's address and that it is up; retrying",
			"err", err, "retry_in", wait.Round(time.Millisecond).String())
		if !backoff.Sleep(ctx, wait) {
			return ctx.Err()
		}
	}
}

// permanent reports errors that reconnecting cannot fix.
func permanent(err error) bool {
	var setupErr *catalog.SetupError
	var schemaErr *decoder.SchemaError
	if errors.As(err, &setupErr) || errors.As(err, &schemaErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "28P01", "28000", // authentication failed
			"3D000", // database does not exist
			"42501", // insufficient privilege
			"42P01": // table does not exist
			return true
		}
	}
	return false
}

// slotBusy reports that the slot is streamed by another connection (SQLSTATE 55006).
func slotBusy(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55006"
}

// errorf is fmt.Errorf, named for the step that failed.
func errorf(step string, err error) error { return fmt.Errorf("%s: %w", step, err) }

// checkTable checks the server (stream mode) and the outbox table, retrying while the
// database is unreachable.
func (r *Relay) checkTable(ctx context.Context, pool *pgxpool.Pool) error {
	retry := backoff.New(r.cfg.ReconnectMin, r.cfg.ReconnectMax)
	for {
		conn, err := pool.Acquire(ctx)
		if err == nil {
			if r.cfg.Mode == ModeStream {
				err = catalog.CheckServer(ctx, conn.Conn())
			}
			var tables []table
			for _, tc := range r.cfg.OutboxTables() {
				if err != nil {
					break
				}
				var shape catalog.Shape
				shape, err = catalog.CheckTable(ctx, conn.Conn(), tc.Table, tc.Columns, r.cfg.Publication)
				route, _ := tc.route() // checked by Validate
				tables = append(tables, table{TableConfig: tc, shape: shape, name: shape.Qualified(), route: route})
			}
			if err == nil {
				r.tables, r.shape = tables, tables[0].shape
			}
			conn.Release()
		}
		if err == nil || permanent(err) || ctx.Err() != nil {
			return err
		}
		wait := retry.Next()
		r.log.Error("cannot reach postgresql; retrying", "err", err, "retry_in", wait.Round(time.Millisecond).String())
		if !backoff.Sleep(ctx, wait) {
			return nil
		}
	}
}

// checkSchema checks that the database has the walrelay schema this relay reads in
// every mode: the published horizons and their owners (migrations 7 and 8), which
// --on-publish progress records, catch-up passes leave out rows by, every stream
// claims its tables in, and the poller's due test widens xids with; and the record of
// the confirmed position that sessions resume from (migration 9).
func checkSchema(ctx context.Context, pool *pgxpool.Pool) error {
	ok, err := catalog.HasHorizons(ctx, pool)
	if err != nil {
		return errorf("look up walrelay_progress", err)
	}
	if !ok {
		return &catalog.SetupError{Msg: "the database's walrelay schema is older than this walrelay (it lacks " +
			"walrelay_progress or walrelay_table_slots, migrations 7 and 8): run walrelay migrate"}
	}
	if ok, err = catalog.HasConfirmedRecord(ctx, pool); err != nil {
		return errorf("look up walrelay_confirmed", err)
	}
	if !ok {
		return &catalog.SetupError{Msg: "the database's walrelay schema is older than this walrelay (it lacks " +
			"walrelay_confirmed, migration 9): run walrelay migrate"}
	}
	return nil
}

// tableNames lists the outbox tables, schema-qualified, for logs.
func (r *Relay) tableNames() []string {
	names := make([]string, len(r.tables))
	for i, t := range r.tables {
		names[i] = t.name
	}
	return names
}

// catalogTables are the outbox tables as catalog's checks take them.
func (r *Relay) catalogTables() []catalog.Table {
	tables := make([]catalog.Table, len(r.tables))
	for i, t := range r.tables {
		tables[i] = catalog.Table{Name: t.Table, Columns: t.Columns}
	}
	return tables
}

// splitIdent splits a possibly schema-qualified name for pgx.Identifier.
func splitIdent(name string) []string { return strings.Split(name, ".") }

// checkPrivileges checks, before anything starts, that the relay's role may do what
// its mode does to the outbox tables and walrelay's own.
func (r *Relay) checkPrivileges(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return errorf("check the role's privileges", err)
	}
	defer conn.Release()
	return catalog.CheckPrivileges(ctx, conn.Conn(), catalog.RelayGrants(r.tableIdents(), r.cfg.GrantNeeds()))
}

// tableIdents are the outbox tables as SQL names them.
func (r *Relay) tableIdents() []string {
	idents := make([]string, len(r.tables))
	for i, t := range r.tables {
		idents[i] = t.shape.Ident()
	}
	return idents
}
