package ops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/dbconn"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/relay"
)

// Status is what `walrelay status` reports about a relay's slot and tables: whether
// the outbox is being relayed, and if not, the problems found.
type Status struct {
	Slot       string `json:"slot"`
	SlotExists bool   `json:"slot_exists"`
	// SlotActive: a relay streams the slot. A walsender holds it and heard from its
	// client within wal_sender_timeout (slotHolder.streamed); the slot being
	// active in pg_replication_slots is not enough.
	SlotActive   bool   `json:"slot_active"`
	ConfirmedLSN string `json:"confirmed_lsn,omitempty"`
	LagBytes     int64  `json:"lag_bytes"`
	WALStatus    string `json:"wal_status,omitempty"`
	// LastStatusUpdate is the walsender's last standby status update from the
	// relay. Keepalives move it too: it says the relay answers, not that events flow.
	LastStatusUpdate  *time.Time `json:"last_status_update,omitempty"`
	Publication       string     `json:"publication"`
	PublicationExists bool       `json:"publication_exists"`
	// OnPublish is the --on-publish mode the pending counts assume.
	OnPublish   poller.OnPublish `json:"on_publish"`
	PendingRows int64            `json:"pending_rows"`
	// RetryingRows are the pending rows handed to the poller for a retry; the age
	// bound does not apply to them, their retry time does.
	RetryingRows int64 `json:"retrying_rows"`
	// OverdueRetries are retrying rows more than the age bound past their retry time.
	OverdueRetries   int64   `json:"overdue_retries"`
	DeadLetters      int64   `json:"dead_letters"`
	OldestPendingAge float64 `json:"oldest_pending_age_seconds"` // of the pending rows not retrying
	// SlotReplacedAt and SlotReplacedReason: the last time the relay found the slot
	// lost or missing and created it again, and why.
	SlotReplacedAt     *time.Time `json:"slot_replaced_at,omitempty"`
	SlotReplacedReason string     `json:"slot_replaced_reason,omitempty"`
	// PublishedHorizonAt is when the slot's published horizon (--on-publish
	// progress) last moved.
	PublishedHorizonAt *time.Time `json:"published_horizon_at,omitempty"`
	// Relay is what the relay answered over HTTP; nil when no address was given.
	Relay *RelayHealth `json:"relay,omitempty"`
	// Sink and Build are what the admin API's /status adds: where the relay
	// publishes and which walrelay it is (package admin); `walrelay status` leaves
	// them out.
	Sink     *SinkStatus  `json:"sink,omitempty"`
	Build    *BuildStatus `json:"build,omitempty"`
	Problems []Problem    `json:"problems"`
	// Tables has a row per outbox table; the counts above are their sums,
	// OldestPendingAge their maximum.
	Tables []TableStatus `json:"tables"`
}

// SinkStatus is where a relay publishes: the broker's kind, its addresses with
// credentials redacted (internal/redact) and the topic template.
type SinkStatus struct {
	Kind          string   `json:"kind"`
	Brokers       []string `json:"brokers"`
	TopicTemplate string   `json:"topic_template,omitempty"`
}

// BuildStatus is the walrelay build a relay runs (internal/buildinfo).
type BuildStatus struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
}

// TableStatus is one outbox table's part of Status.
type TableStatus struct {
	Table            string  `json:"table"`
	PendingRows      int64   `json:"pending_rows"`
	RetryingRows     int64   `json:"retrying_rows"`
	OverdueRetries   int64   `json:"overdue_retries"`
	DeadLetters      int64   `json:"dead_letters"`
	OldestPendingAge float64 `json:"oldest_pending_age_seconds"`
}

// Problem is one thing Status found wrong.
type Problem struct {
	Check   Check  `json:"check"`
	Message string `json:"message"`
}

// Check names what a Problem is about; `walrelay status` exits with a code per check.
type Check string

const (
	// CheckDatabase: the database could not be read (ReadStatus's error).
	CheckDatabase Check = "database"
	// CheckNotStreamed: no relay streams the slot: it does not exist, no walsender
	// holds it, or its walsender has not heard from the relay within
	// wal_sender_timeout.
	CheckNotStreamed Check = "not_streamed"
	// CheckPending: a row has waited longer than StatusLimits.MaxPendingAge.
	CheckPending Check = "pending"
	// CheckRelayNotReady: the relay's /readyz answers that it is not ready, or the
	// relay named by StatusLimits.RelayURL (Required) cannot be reached.
	CheckRelayNotReady Check = "relay_not_ready"
	// CheckSlot: the slot is lost, or was replaced in the last day.
	CheckSlot Check = "slot"
	// CheckPublication: the publication does not exist.
	CheckPublication Check = "publication"
	// CheckDeadLetters: more dead letters than StatusLimits.MaxDeadLetters.
	CheckDeadLetters Check = "dead_letters"
)

// recentReplacement is how long a slot's replacement counts as a problem.
const recentReplacement = 24 * time.Hour

// StatusLimits say when Status reports a problem.
type StatusLimits struct {
	MaxDeadLetters int64
	// MaxPendingAge: a pending row older than this, or a row handed to the poller
	// this long past its retry time, is a problem (0: no bound).
	MaxPendingAge time.Duration
	// RelayURL is the relay's HTTP address (its --metrics-addr), as
	// http://host:port; empty: the relay is not asked.
	RelayURL string
	// RelayDatabase, when set, is the database to ask of a relay that runs several
	// (Group): its /readyz?database=NAME and its metrics labelled database="NAME".
	RelayDatabase string
	// RelayRequired makes a relay that cannot be reached at RelayURL a problem;
	// otherwise it is only reported.
	RelayRequired bool
}

func (st *Status) problem(check Check, format string, args ...any) {
	st.Problems = append(st.Problems, Problem{Check: check, Message: fmt.Sprintf(format, args...)})
}

// ReadStatus reads the slot, publication and outbox tables named in cfg (the database
// and primary URLs, tables, columns, slot, publication, mode and on-publish mode are
// used): the slot and publication on the database, the rest on the primary while the
// database is a standby. It asks the relay at limits.RelayURL for its readiness, and
// lists problems.
func ReadStatus(ctx context.Context, cfg relay.Config, limits StatusLimits) (*Status, error) {
	if _, err := pgx.ParseConfig(cfg.DatabaseURL); err != nil {
		return nil, errorf("parse database url (check --database-url)", dbconn.ParseError(err, cfg.DatabaseURL))
	}
	// The slot is read where it is (a --database-url naming several servers: pair.go).
	slotURL, waiting := relay.SlotServer(ctx, cfg)
	conn, err := dbconn.Connect(ctx, slotURL, cfg.DatabasePassword)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	// The slot is read where it lives, the rows and walrelay's records where the
	// relay writes them: the primary while --database-url is a standby (BooksURL).
	books := conn
	standby, err := dbconn.InRecovery(ctx, conn)
	if err != nil {
		return nil, err
	}
	if primary := dbconn.PrimaryURL(cfg.PrimaryURL, cfg.DatabaseURL); standby && primary != "" {
		if books, err = dbconn.Connect(ctx, primary, cfg.DatabasePassword); err != nil {
			return nil, errorf("the primary (--primary-url, or the read-write server of --database-url)", err)
		}
		defer books.Close(context.Background())
	}
	st := &Status{Slot: cfg.Slot, Publication: cfg.Publication, OnPublish: cfg.OnPublishMode(), Problems: []Problem{}}
	if waiting != "" {
		st.problem(CheckNotStreamed, "no relay can stream slot %s now: %s", cfg.Slot, waiting)
	}
	if limits.RelayURL != "" {
		st.Relay = probeRelay(ctx, limits.RelayURL, cfg.Slot, limits.RelayDatabase)
		switch h := st.Relay; {
		case h.Reachable && !h.Ready:
			st.problem(CheckRelayNotReady, "the relay at %s is not ready: %s", h.URL, h.Answer)
		case !h.Reachable && limits.RelayRequired:
			st.problem(CheckRelayNotReady, "cannot ask the relay at %s whether it is ready: %s", h.URL, h.Error)
		}
	}

	var active *bool
	var pid *int32
	var confirmed, walStatus *string
	var lag *int64
	var replyTime *time.Time
	holder := slotHolder{}
	var timeoutMS int64
	err = conn.QueryRow(ctx, `SELECT s.active, s.active_pid, r.pid IS NOT NULL, coalesce(r.reply_time, r.backend_start),
			s.confirmed_flush_lsn::text, s.wal_status,
			pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END,
				s.confirmed_flush_lsn)::bigint, r.reply_time, clock_timestamp(),
			(SELECT setting::bigint FROM pg_settings WHERE name = 'wal_sender_timeout')
		FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid
		WHERE s.slot_name = $1`, cfg.Slot).Scan(&active, &pid, &holder.Walsender, &holder.Heard, &confirmed, &walStatus, &lag,
		&replyTime, &holder.Now, &timeoutMS)
	notStreamed := ""
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if cfg.Mode != relay.ModePoll && waiting == "" {
			var walLevel string
			if err := conn.QueryRow(ctx, "SELECT current_setting('wal_level')").Scan(&walLevel); err != nil {
				return nil, errorf("read wal_level", err)
			}
			if walLevel != "logical" {
				st.problem(CheckNotStreamed, "slot %s does not exist, and no relay can create it: %s", cfg.Slot, catalog.WALLevelAdvice(walLevel))
			} else {
				st.problem(CheckNotStreamed, "slot %s does not exist: no relay has streamed it yet (walrelay run creates it)", cfg.Slot)
			}
		}
	case err != nil:
		return nil, errorf("read slot", err)
	default:
		st.SlotExists = true
		holder.Active = active != nil && *active
		if pid != nil {
			holder.PID = int(*pid)
		}
		holder.Timeout = time.Duration(timeoutMS) * time.Millisecond
		st.SlotActive, notStreamed = holder.streamed()
		st.ConfirmedLSN, st.WALStatus = deref(confirmed), deref(walStatus)
		if lag != nil {
			st.LagBytes = *lag
		}
		st.LastStatusUpdate = replyTime
	}
	switch {
	case st.WALStatus == "lost":
		st.problem(CheckSlot, "slot %s is lost: PostgreSQL removed WAL it needed", cfg.Slot)
	case !st.SlotExists || st.SlotActive || cfg.Mode == relay.ModePoll:
	case notStreamed != "":
		st.problem(CheckNotStreamed, "slot %s: %s", cfg.Slot, notStreamed)
	default:
		st.problem(CheckNotStreamed, "no process streams slot %s: start walrelay run, or read its log for why it is not streaming "+
			"(it waits for the broker and for the database before it streams)", cfg.Slot)
	}

	st.SlotReplacedAt, st.SlotReplacedReason, err = catalog.ReadReplaced(ctx, books, cfg.Slot)
	if err != nil {
		return nil, errorf("read walrelay_slots (run walrelay migrate?)", err)
	}
	if st.SlotReplacedAt != nil && time.Since(*st.SlotReplacedAt) < recentReplacement {
		st.problem(CheckSlot, "slot %s was replaced at %s: %s", cfg.Slot,
			st.SlotReplacedAt.UTC().Format(time.RFC3339), st.SlotReplacedReason)
	}

	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)", cfg.Publication).
		Scan(&st.PublicationExists); err != nil {
		return nil, errorf("read publication", err)
	}
	if !st.PublicationExists && cfg.Mode != relay.ModePoll {
		st.problem(CheckPublication, "publication %s does not exist (walrelay migrate creates it)", cfg.Publication)
	}

	// Where the database keeps published horizons (migration 7), a row is pending
	// when it is not published by the derived rule (docs/design.md invariant 10),
	// which reads every row not marked: a scan of the table's unmarked rows.
	horizons, err := catalog.HasHorizons(ctx, books)
	if err != nil {
		return nil, errorf("look up walrelay_progress", err)
	}
	if horizons {
		at, err := catalog.LastHorizonAt(ctx, books, cfg.Slot)
		if err != nil {
			return nil, errorf("read walrelay_progress", err)
		}
		st.PublishedHorizonAt = at
	}
	oldestTable := ""
	for _, t := range cfg.OutboxTables() {
		ts, err := readTableStatus(ctx, books, t, horizons, limits.MaxPendingAge)
		if err != nil {
			return nil, err
		}
		st.Tables = append(st.Tables, ts)
		st.PendingRows += ts.PendingRows
		st.RetryingRows += ts.RetryingRows
		st.OverdueRetries += ts.OverdueRetries
		st.DeadLetters += ts.DeadLetters
		if ts.OldestPendingAge > st.OldestPendingAge {
			st.OldestPendingAge, oldestTable = ts.OldestPendingAge, ts.Table
		}
	}
	st.checkPending(cfg, limits.MaxPendingAge, oldestTable)
	if st.DeadLetters > limits.MaxDeadLetters {
		st.problem(CheckDeadLetters, "%d dead letters (more than %d); see walrelay dlq list", st.DeadLetters, limits.MaxDeadLetters)
	}
	return st, nil
}

// checkPending reports rows that wait longer than bound. With --on-publish none
// nothing marks a published row, so no row can be told pending.
func (st *Status) checkPending(cfg relay.Config, bound time.Duration, oldestTable string) {
	if bound <= 0 || st.OnPublish == poller.None {
		return
	}
	if age := time.Duration(st.OldestPendingAge * float64(time.Second)); age > bound {
		advice := "its event has not reached the broker: is a relay running and streaming, and does the broker acknowledge? " +
			"(the relay's log and /readyz say)"
		if cfg.Mode == relay.ModePoll {
			advice = "its event has not reached the broker: is a relay polling, and does the broker acknowledge? (the relay's log and /readyz say)"
		}
		if st.OnPublish == poller.Progress {
			advice += "; with --on-publish progress a transaction open for long anywhere on the server also keeps published rows " +
				"pending until it ends (SELECT pid, xact_start FROM pg_stat_activity WHERE backend_xid IS NOT NULL ORDER BY xact_start)"
		}
		st.problem(CheckPending, "the oldest pending row of %s is %s old, over the %s bound: %s", oldestTable,
			age.Round(time.Second), bound, advice)
	}
	if st.OverdueRetries > 0 {
		st.problem(CheckPending, "%d rows handed to the poller for a retry are more than %s past their retry time: "+
			"no relay's poller publishes them (the relay's log says why)", st.OverdueRetries, bound)
	}
}

// readTableStatus counts one outbox table's pending rows and dead letters; with
// horizons, rows the published horizon covers are not pending.
func readTableStatus(ctx context.Context, conn *pgx.Conn, t relay.TableConfig, horizons bool, bound time.Duration) (TableStatus, error) {
	shape, err := catalog.DescribeTable(ctx, conn, t.Table, t.Columns)
	if err != nil {
		return TableStatus{}, errorf("read outbox table "+t.Table, err)
	}
	ts := TableStatus{Table: shape.Qualified()}
	// The oldest pending row's age needs its creation time: without a created_at
	// column it is not known and reported as 0.
	created := "NULL::timestamptz"
	switch {
	case shape.Columns.CreatedAt == "":
	case shape.CreatedAtType == "timestamp":
		created = "(" + pgx.Identifier{shape.Columns.CreatedAt}.Sanitize() + " AT TIME ZONE 'UTC')"
	default:
		created = pgx.Identifier{shape.Columns.CreatedAt}.Sanitize()
	}
	pending := "processed_at IS NULL"
	args := []any{bound.Seconds()}
	if horizons {
		pending = catalog.NotPublished("$2::text", " ")
		args = append(args, shape.Ident())
	}
	var oldest *float64
	err = conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE dead_lettered_at IS NULL),
			count(*) FILTER (WHERE dead_lettered_at IS NULL AND retry_after IS NOT NULL),
			count(*) FILTER (WHERE dead_lettered_at IS NULL AND retry_after < now() - make_interval(secs => $1)),
			count(*) FILTER (WHERE dead_lettered_at IS NOT NULL),
			extract(epoch FROM now() - min(`+created+`) FILTER (WHERE dead_lettered_at IS NULL AND retry_after IS NULL))::float8
		FROM `+shape.Ident()+` WHERE `+pending, args...).Scan(&ts.PendingRows, &ts.RetryingRows, &ts.OverdueRetries, &ts.DeadLetters, &oldest)
	if err != nil {
		return TableStatus{}, errorf("read outbox table "+t.Table+" (run walrelay migrate?)", err)
	}
	if oldest != nil {
		ts.OldestPendingAge = *oldest
	}
	return ts, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// errorf wraps err with the step that failed.
func errorf(step string, err error) error { return fmt.Errorf("%s: %w", step, err) }
