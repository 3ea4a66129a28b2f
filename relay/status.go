package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/replication"
)

// Status is what `walrelay status` reports about a relay's slot and table.
type Status struct {
	Slot              string     `json:"slot"`
	SlotExists        bool       `json:"slot_exists"`
	SlotActive        bool       `json:"slot_active"`
	ConfirmedLSN      string     `json:"confirmed_lsn,omitempty"`
	LagBytes          int64      `json:"lag_bytes"`
	WALStatus         string     `json:"wal_status,omitempty"`
	LastConfirm       *time.Time `json:"last_confirm,omitempty"` // the walsender's last status update
	Publication       string     `json:"publication"`
	PublicationExists bool       `json:"publication_exists"`
	PendingRows       int64      `json:"pending_rows"`
	DeadLetters       int64      `json:"dead_letters"`
	OldestPendingAge  float64    `json:"oldest_pending_age_seconds"`
	// SlotReplacedAt and SlotReplacedReason: the last time the relay found the slot
	// lost or missing and created it again, and why.
	SlotReplacedAt     *time.Time `json:"slot_replaced_at,omitempty"`
	SlotReplacedReason string     `json:"slot_replaced_reason,omitempty"`
	// PublishedHorizonAt is when the slot's published horizon (--on-publish
	// progress) last moved.
	PublishedHorizonAt *time.Time `json:"published_horizon_at,omitempty"`
	Problems           []string   `json:"problems"`
	// Tables has a row per outbox table; PendingRows and DeadLetters above are their
	// sums, OldestPendingAge their maximum.
	Tables []TableStatus `json:"tables"`
}

// TableStatus is one outbox table's part of Status.
type TableStatus struct {
	Table            string  `json:"table"`
	PendingRows      int64   `json:"pending_rows"`
	DeadLetters      int64   `json:"dead_letters"`
	OldestPendingAge float64 `json:"oldest_pending_age_seconds"`
}

// recentReplacement is how long a slot's replacement counts as a problem.
const recentReplacement = 24 * time.Hour

// StatusLimits say when Status reports a problem.
type StatusLimits struct {
	MaxDeadLetters int64
	// StallTimeout: an active slot that is behind and has not been confirmed for this
	// long is stalled.
	StallTimeout time.Duration
}

// ReadStatus reads the slot, publication and outbox table named in cfg (only the
// database URL, table, columns, slot, publication and mode are used) and lists problems.
func ReadStatus(ctx context.Context, cfg Config, limits StatusLimits) (*Status, error) {
	conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, errorf("connect to postgresql", err)
	}
	defer conn.Close(context.Background())
	st := &Status{Slot: cfg.Slot, Publication: cfg.Publication, Problems: []string{}}

	var active *bool
	var confirmed, walStatus *string
	var lag *int64
	var replyTime *time.Time
	err = conn.QueryRow(ctx, `SELECT s.active, s.confirmed_flush_lsn::text, s.wal_status,
			pg_wal_lsn_diff(pg_current_wal_lsn(), s.confirmed_flush_lsn)::bigint, r.reply_time
		FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid
		WHERE s.slot_name = $1`, cfg.Slot).Scan(&active, &confirmed, &walStatus, &lag, &replyTime)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if cfg.Mode != ModePoll {
			st.Problems = append(st.Problems, "slot "+cfg.Slot+" does not exist (walrelay run creates it)")
		}
	case err != nil:
		return nil, errorf("read slot", err)
	default:
		st.SlotExists = true
		st.SlotActive = active != nil && *active
		st.ConfirmedLSN, st.WALStatus = deref(confirmed), deref(walStatus)
		if lag != nil {
			st.LagBytes = *lag
		}
		st.LastConfirm = replyTime
	}
	if st.WALStatus == "lost" {
		st.Problems = append(st.Problems, "slot "+cfg.Slot+" is lost: PostgreSQL removed WAL it needed")
	}
	if st.SlotActive && st.LagBytes > 1<<20 && st.LastConfirm != nil && time.Since(*st.LastConfirm) > limits.StallTimeout {
		st.Problems = append(st.Problems, fmt.Sprintf("stalled: %d bytes behind and no status update for %s",
			st.LagBytes, time.Since(*st.LastConfirm).Round(time.Second)))
	}

	err = conn.QueryRow(ctx, "SELECT replaced_at, coalesce(replaced_reason, '') FROM walrelay_slots WHERE slot_name = $1", cfg.Slot).
		Scan(&st.SlotReplacedAt, &st.SlotReplacedReason)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, errorf("read walrelay_slots (run walrelay migrate?)", err)
	}
	if st.SlotReplacedAt != nil && time.Since(*st.SlotReplacedAt) < recentReplacement {
		st.Problems = append(st.Problems, fmt.Sprintf("slot %s was replaced at %s: %s", cfg.Slot,
			st.SlotReplacedAt.UTC().Format(time.RFC3339), st.SlotReplacedReason))
	}

	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)", cfg.Publication).
		Scan(&st.PublicationExists); err != nil {
		return nil, errorf("read publication", err)
	}
	if !st.PublicationExists && cfg.Mode != ModePoll {
		st.Problems = append(st.Problems, "publication "+cfg.Publication+" does not exist")
	}

	// Where the database keeps published horizons (migration 7), a row is pending
	// when it is not published by the derived rule (docs/design.md invariant 10),
	// which reads every row not marked: a scan of the table's unmarked rows.
	horizons, err := replication.HasHorizons(ctx, conn)
	if err != nil {
		return nil, errorf("look up walrelay_progress", err)
	}
	if horizons {
		var at *time.Time
		err := conn.QueryRow(ctx, "SELECT max(recorded_at) FROM walrelay_progress WHERE slot_name = $1", cfg.Slot).Scan(&at)
		if err != nil {
			return nil, errorf("read walrelay_progress", err)
		}
		st.PublishedHorizonAt = at
	}
	for _, t := range cfg.OutboxTables() {
		ts, err := readTableStatus(ctx, conn, t, horizons)
		if err != nil {
			return nil, err
		}
		st.Tables = append(st.Tables, ts)
		st.PendingRows += ts.PendingRows
		st.DeadLetters += ts.DeadLetters
		st.OldestPendingAge = max(st.OldestPendingAge, ts.OldestPendingAge)
	}
	if st.DeadLetters > limits.MaxDeadLetters {
		st.Problems = append(st.Problems, fmt.Sprintf("%d dead letters (more than %d); see walrelay dlq list",
			st.DeadLetters, limits.MaxDeadLetters))
	}
	return st, nil
}

// readTableStatus counts one outbox table's pending rows and dead letters; with
// horizons, rows the published horizon covers are not pending.
func readTableStatus(ctx context.Context, conn *pgx.Conn, t TableConfig, horizons bool) (TableStatus, error) {
	shape, err := replication.DescribeTable(ctx, conn, t.Table, t.Columns)
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
	if horizons {
		pending = "NOT walrelay_published(xmin, processed_at, retry_after, dead_lettered_at, " +
			"(SELECT walrelay_horizon($1::text::regclass)), (SELECT walrelay_next_xid()))"
	}
	var args []any
	if horizons {
		args = append(args, shape.Ident())
	}
	var oldest *float64
	err = conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE dead_lettered_at IS NULL),
			count(*) FILTER (WHERE dead_lettered_at IS NOT NULL),
			extract(epoch FROM now() - min(`+created+`) FILTER (WHERE dead_lettered_at IS NULL))::float8
		FROM `+shape.Ident()+` WHERE `+pending, args...).Scan(&ts.PendingRows, &ts.DeadLetters, &oldest)
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
