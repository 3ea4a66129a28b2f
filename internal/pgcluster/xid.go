package pgcluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// xidStep is how far one pg_resetwal moves the next xid: below 2^31 less the
// margins PostgreSQL's wraparound protection keeps (it counts from the oldest
// database's frozen xid, which the freeze after each step brings forward).
const xidStep = 1<<31 - 1<<28

// AdvanceXID moves the cluster's next transaction id forward to target (a 64-bit
// xid), as if that many transactions had run: for tests of xid ages. It freezes
// every database (template0 too, which it opens to connections), then moves the
// counter with pg_resetwal -x in steps below 2^31, each followed by a restart and a
// freeze, so PostgreSQL never stops for wraparound. Frozen rows keep their raw xmin.
// A replication slot holds the freeze back, so there must be none. The cluster must
// be running, and is again on return.
func (c *Cluster) AdvanceXID(ctx context.Context, target uint64) error {
	for {
		next, err := c.freezeAll(ctx)
		if err != nil {
			return err
		}
		if next >= target {
			return nil
		}
		to := min(target, next+xidStep)
		if err := c.Stop(); err != nil {
			return err
		}
		if err := c.resetXID(ctx, to); err != nil {
			return err
		}
		if err := c.StartAgain(ctx); err != nil {
			return err
		}
	}
}

// freezeAll runs VACUUM (FREEZE) in every database and returns the next xid.
func (c *Cluster) freezeAll(ctx context.Context) (uint64, error) {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return 0, fmt.Errorf("connect to freeze: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "ALTER DATABASE template0 ALLOW_CONNECTIONS true"); err != nil {
		return 0, fmt.Errorf("open template0 to freeze it: %w", err)
	}
	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database")
	if err != nil {
		return 0, fmt.Errorf("list databases: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("list databases: %w", err)
	}
	for _, name := range names {
		db, err := pgx.Connect(ctx, c.URL(name))
		if err != nil {
			return 0, fmt.Errorf("connect to %s to freeze it: %w", name, err)
		}
		_, err = db.Exec(ctx, "VACUUM (FREEZE)")
		db.Close(context.Background())
		if err != nil {
			return 0, fmt.Errorf("freeze %s: %w", name, err)
		}
	}
	var next uint64
	if err := conn.QueryRow(ctx, "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint").Scan(&next); err != nil {
		return 0, fmt.Errorf("read the next xid: %w", err)
	}
	return next, nil
}

// resetXID sets the stopped cluster's next xid with pg_resetwal and creates the
// commit log segment it falls in, which the server reads at start.
func (c *Cluster) resetXID(ctx context.Context, next uint64) error {
	epoch, xid := next>>32, next&0xffffffff
	var out bytes.Buffer
	cmd := c.as.command(c.dir, filepath.Join(c.binDir, "pg_resetwal"),
		"-e", strconv.FormatUint(epoch, 10), "-x", strconv.FormatUint(xid, 10), c.dataDir())
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start pg_resetwal: %w", err)
	}
	if err := waitCtx(ctx, cmd.Process.Pid, cmd.Wait); err != nil {
		return withOutput(fmt.Errorf("pg_resetwal: %w", err), "pg_resetwal output", out.String())
	}
	// pg_xact: 32 pages of 8 KiB, each 32768 xids at two bits; segment names have
	// the width of the existing ones (four hex digits up to PostgreSQL 16).
	const segmentXids, segmentBytes = 32 * 32768, 32 * 8192
	dir := filepath.Join(c.dataDir(), "pg_xact")
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		return fmt.Errorf("read %s: %v (%d segments)", dir, err, len(entries))
	}
	name := fmt.Sprintf("%0*X", len(entries[0].Name()), xid/segmentXids)
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.WriteFile(path, make([]byte, segmentBytes), 0o600); err != nil {
		return fmt.Errorf("create commit log segment %s: %w", path, err)
	}
	return c.as.chown(path)
}
