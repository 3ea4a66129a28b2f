package migrations

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/outbox"
)

// DefaultLargeTable is the row count (pg_class.reltuples) above which migrate builds
// the outbox table's indexes with CREATE INDEX CONCURRENTLY, after its transaction,
// instead of holding a write-blocking lock for the build.
const DefaultLargeTable = 100_000

// Options says which outbox table to create or adopt, and how.
type Options struct {
	DatabaseURL string
	// Password, when set, is asked before each connection migrate opens and replaces
	// the URL's password: for tokens that expire, such as AWS RDS IAM tokens.
	Password func(ctx context.Context) (string, error)
	// Table is the outbox table, optionally schema-qualified (default outbox_events;
	// unqualified means public, as for the relay).
	Table string
	// Columns names the table's event columns (default outbox.DefaultColumns).
	Columns outbox.Columns
	// Publication is created for Table when missing (default "walrelay").
	Publication string
	// Listed says Table is one of a tables list published through Publication: an
	// existing table the publication lacks is added to it (the list says it belongs),
	// where a single table would be a conflict to resolve by hand.
	Listed bool
	// DryRun prints the SQL migrate would run and changes nothing.
	DryRun bool
	// LockTimeout bounds each wait for a lock inside the migration transaction
	// (default 10s), so that migrate never queues the application's writes behind it
	// for long.
	LockTimeout time.Duration
	// LargeTable overrides DefaultLargeTable.
	LargeTable float64
	// Out receives what migrate does, statement by statement (nil: discarded).
	Out io.Writer
	// ProgressEvery is how often a CREATE INDEX CONCURRENTLY prints its progress
	// (pg_stat_progress_create_index) to Out (default 5s).
	ProgressEvery time.Duration
}

func (o Options) largeTable() float64 {
	if o.LargeTable > 0 {
		return o.LargeTable
	}
	return DefaultLargeTable
}

// Report is what Migrate did (or, in a dry run, would do).
type Report struct {
	Applied []Result // versioned migrations of walrelay's own tables
	Steps   []Step   // statements for the outbox table
	// WALLevel is the server's wal_level: stream mode needs logical, which
	// migrate does not.
	WALLevel string
}

// advisoryLock serialises concurrent migrate runs (any constant; "walrelay" in hex).
const advisoryLock = 0x77616c72656c6179

// Migrate creates walrelay's tables and creates or adopts the outbox table: it adds
// only the bookkeeping columns, indexes, dead-letter view and publication that are
// missing. Everything runs in one transaction, except CREATE INDEX CONCURRENTLY
// (tables over LargeTable rows), which runs after the commit. When something of the
// same name means something else, it returns a *ConflictError and changes nothing.
func Migrate(ctx context.Context, o Options) (Report, error) {
	if o.Table == "" {
		o.Table = outbox.DefaultTable
	}
	if o.Columns.ID == "" && o.Columns.Payload == "" {
		o.Columns = outbox.DefaultColumns()
	}
	if o.Publication == "" {
		o.Publication = "walrelay"
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = 10 * time.Second
	}
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	var rep Report
	conn, err := o.connect(ctx)
	if err != nil {
		return rep, fmt.Errorf("connect to postgresql: %w", err)
	}
	defer conn.Close(context.Background())

	access := pgx.ReadWrite
	if o.DryRun {
		access = pgx.ReadOnly
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: access})
	if err != nil {
		return rep, fmt.Errorf("begin migration transaction: %w", err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // after Commit it does nothing
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", o.LockTimeout.Milliseconds())); err != nil {
		return rep, fmt.Errorf("set lock_timeout: %w", err)
	}
	if !o.DryRun {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(advisoryLock)); err != nil {
			return rep, fmt.Errorf("wait for another walrelay migrate: %w", err)
		}
	}
	if err := tx.QueryRow(ctx, "SELECT current_setting('wal_level')").Scan(&rep.WALLevel); err != nil {
		return rep, fmt.Errorf("read wal_level: %w", err)
	}
	_, pending, versionTable, err := pendingVersions(ctx, tx)
	if err != nil {
		return rep, err
	}
	p, err := planOutbox(ctx, tx, o)
	if err != nil {
		return rep, err
	}
	rep.Steps = p.steps
	if len(p.conflicts) > 0 {
		return rep, &ConflictError{Table: p.display, Conflicts: p.conflicts}
	}
	if p.exists && len(p.steps) > 0 {
		how := "inside the transaction"
		switch {
		case p.large && p.partitioned:
			how = "CONCURRENTLY per partition after it"
		case p.large:
			how = "CONCURRENTLY after it"
		}
		fmt.Fprintf(out, "adopting existing table %s (about %.0f rows: indexes are built %s)\n", p.display, max(p.rows, 0), how)
	}

	if o.DryRun {
		printDryRun(out, pending, p)
		return rep, nil
	}

	began := time.Now()
	if rep.Applied, err = applyVersions(ctx, tx, pending, versionTable); err != nil {
		return rep, lockAdvice(err, o)
	}
	var locked time.Time
	var lockMode string
	for _, s := range p.steps {
		if s.Concurrent {
			continue
		}
		start := time.Now()
		if _, err := tx.Exec(ctx, s.SQL); err != nil {
			return rep, lockAdvice(fmt.Errorf("%s: %w\nnothing was changed (the migration transaction rolled back)", oneLine(s.SQL), err), o)
		}
		if s.Lock != "" && (locked.IsZero() || stronger(s.Lock, lockMode)) {
			if locked.IsZero() {
				locked = start
			}
			lockMode = s.Lock
		}
		fmt.Fprintf(out, "ran %s (%s)\n", oneLine(s.SQL), since(start))
	}
	if err := tx.Commit(ctx); err != nil {
		return rep, fmt.Errorf("commit migration: %w\nnothing was changed", err)
	}
	for _, m := range rep.Applied {
		fmt.Fprintf(out, "applied migration %d (%s, ran %s)\n", m.Version, m.Name, m.Took)
	}
	if !locked.IsZero() {
		fmt.Fprintf(out, "committed in %s; table %s was locked %s for %s (from its first statement to the commit)\n",
			since(began), p.display, lockWord(lockMode), since(locked))
	}

	for _, s := range p.steps {
		if !s.Concurrent {
			continue
		}
		fmt.Fprintf(out, "running %s after the commit (lock on %s: %s)\n", oneLine(s.SQL), s.on(p), s.Lock)
		start := time.Now()
		stopWatch := watchIndexBuild(ctx, o, conn.PgConn().PID(), out)
		_, err := conn.Exec(ctx, s.SQL)
		stopWatch()
		if err != nil {
			return rep, fmt.Errorf("%s: %w\nthe transaction's changes are committed; a failed concurrent build leaves an INVALID index, which the next walrelay migrate drops and builds again: run it again", oneLine(s.SQL), err)
		}
		fmt.Fprintf(out, "ran %s (%s)\n", oneLine(s.SQL), since(start))
	}
	return rep, nil
}

func printDryRun(out io.Writer, pending []versioned, p *plan) {
	var tx, concurrent []string
	for _, m := range pending {
		tx = append(tx, fmt.Sprintf("-- migration %d (%s)\n%s", m.Version, m.Name, m.up))
	}
	for _, s := range p.steps {
		text := s.SQL + ";"
		if s.Lock != "" {
			text = "-- lock on " + s.on(p) + ": " + s.Lock + "\n" + text
		}
		if s.Concurrent {
			concurrent = append(concurrent, text)
		} else {
			tx = append(tx, text)
		}
	}
	if len(tx) == 0 && len(concurrent) == 0 {
		fmt.Fprintln(out, "-- dry run: schema is up to date; nothing to apply")
		return
	}
	fmt.Fprintln(out, "-- dry run: nothing was changed; walrelay migrate would run:")
	if len(tx) > 0 {
		fmt.Fprintf(out, "BEGIN;\n%s\nCOMMIT;\n", strings.Join(tx, "\n\n"))
	}
	if len(concurrent) > 0 {
		fmt.Fprintf(out, "-- then, after the commit (a large table: CONCURRENTLY cannot run in a transaction, and writes go on):\n%s\n",
			strings.Join(concurrent, "\n\n"))
	}
}

// lockAdvice explains a lock_timeout.
func lockAdvice(err error, o Options) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
		return fmt.Errorf("%w\nanother transaction held a lock on the table for more than %s (lock-timeout); nothing was changed: "+
			"find it in pg_stat_activity, or run migrate again when the table is quieter (or with a longer --lock-timeout)", err, o.LockTimeout)
	}
	return err
}

var lockStrength = []string{"ACCESS SHARE", "SHARE UPDATE EXCLUSIVE", "SHARE", "ACCESS EXCLUSIVE"}

func stronger(a, b string) bool { return lockRank(a) > lockRank(b) }

func lockRank(mode string) int {
	m, _, _ := strings.Cut(mode, " (")
	for i, name := range lockStrength {
		if name == m {
			return i
		}
	}
	return -1
}

func lockWord(mode string) string {
	switch lockRank(mode) {
	case 3:
		return "ACCESS EXCLUSIVE (reads and writes waited)"
	case 2:
		return "SHARE (writes waited)"
	default:
		m, _, _ := strings.Cut(mode, " (")
		return m + " (reads and writes went on)"
	}
}

func oneLine(sql string) string { return strings.Join(strings.Fields(sql), " ") }

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }
