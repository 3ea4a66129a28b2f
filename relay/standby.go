package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/backoff"
	"github.com/walrelay/walrelay/internal/dbconn"
)

// StandbyDecodingMajor is the first major version that decodes on a hot standby.
const StandbyDecodingMajor = 16

// booksURL is where walrelay's bookkeeping lives: the primary when the slot is on a
// standby (docs/postgresql.md, "Decoding on a standby"), the database otherwise.
func (c Config) booksURL() string {
	if c.PrimaryURL != "" {
		return c.PrimaryURL
	}
	return c.DatabaseURL
}

// checkStandby finds out whether the database streams from a hot standby and
// refuses what cannot work there: a server older than 16, which cannot decode
// during recovery, and a standby without --primary-url, where nothing can be
// written. It retries while the database is unreachable.
func (r *Relay) checkStandby(ctx context.Context) error {
	if len(urlServers(r.cfg.DatabaseURL)) > 1 {
		r.setUpPair() // each session decides (decodingServer)
		return nil
	}
	retry := backoff.New(r.cfg.ReconnectMin, r.cfg.ReconnectMax)
	for {
		conn, err := r.connect(ctx)
		if err == nil {
			err = r.readStandby(ctx, conn)
			conn.Close(context.Background())
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

// readStandby is one try of checkStandby.
func (r *Relay) readStandby(ctx context.Context, conn *pgx.Conn) error {
	var inRecovery, feedback bool
	var version int
	if err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery(), current_setting('server_version_num')::int,
			current_setting('hot_standby_feedback')::bool`).Scan(&inRecovery, &version, &feedback); err != nil {
		return fmt.Errorf("find out whether the database is a standby: %w", err)
	}
	major := version / 10000
	primaryHost := databaseHost(r.cfg.PrimaryURL)
	if inRecovery && r.cfg.PrimaryURL == "" {
		r.cfg.PrimaryURL = dbconn.PrimaryOfHosts(r.cfg.DatabaseURL) // the URL's read-write server, if it names several
		primaryHost = "the read-write server of --database-url"
	}
	switch {
	case !inRecovery && r.cfg.PrimaryURL != "":
		r.log.Warn("--primary-url is set but --database-url is not a standby (promoted?): the slot and walrelay's "+
			"bookkeeping both stay on --database-url; remove --primary-url", "primary_url", databaseHost(r.cfg.PrimaryURL))
		r.cfg.PrimaryURL = ""
	case !inRecovery:
	case major < StandbyDecodingMajor:
		return &catalog.SetupError{Msg: fmt.Sprintf("--database-url is a hot standby on PostgreSQL %d, which cannot "+
			"decode during recovery (logical decoding on a standby needs PostgreSQL %d or later): point --database-url at "+
			"the primary, or upgrade the standby", major, StandbyDecodingMajor)}
	case r.cfg.PrimaryURL == "":
		return &catalog.SetupError{Msg: "--database-url is a hot standby, where walrelay can stream but not write its " +
			"bookkeeping: set --primary-url (WALRELAY_PRIMARY_URL) to the primary's URL, give --database-url the primary's " +
			"host too (host1,host2: walrelay writes to the read-write one), or point --database-url at the primary"}
	default:
		r.onStandby = true
		if !feedback {
			r.log.Warn("hot_standby_feedback is off on the standby: the primary's vacuum may remove catalog rows the slot " +
				"still needs, which invalidates it (the relay then creates it again with a catch-up pass: duplicates); " +
				"set hot_standby_feedback = on on the standby, with primary_slot_name")
		}
		r.log.Info("decoding on a hot standby: the slot lives on --database-url, the bookkeeping on the primary",
			"standby", databaseHost(r.cfg.DatabaseURL), "primary", primaryHost)
	}
	return nil
}

// databaseHost is a URL's host and port, for logs: never its password.
func databaseHost(url string) string {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
}

// standbySnapshots asks the primary for a running-xacts record every interval until
// stop is called: a slot created on a standby waits for one to reach it, and on an
// idle primary the next comes only with a checkpoint (pg_log_standby_snapshot,
// PostgreSQL 16+).
func (r *Relay) standbySnapshots(ctx context.Context) (stop func()) {
	if !r.onStandby {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(200 * time.Millisecond)
		defer ticker.Stop()
		warned := false
		for {
			if _, err := r.pool.Exec(ctx, "SELECT pg_log_standby_snapshot()"); err != nil && ctx.Err() == nil && !warned {
				r.log.Warn("could not ask the primary for a standby snapshot (pg_log_standby_snapshot needs a superuser, "+
					"or EXECUTE on it): creating the slot on the standby waits for the primary's next checkpoint", "err", err)
				warned = true
			}
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// checkStillStandby fails when the standby the slot is on was promoted: the slot
// goes on there, but the bookkeeping written to --primary-url from then on would
// belong to another cluster, and a hand-over kept there alone could be lost with it.
// It runs before each confirmation, so nothing confirmed after the promotion rests
// on such a record; the restarted relay keeps everything on the promoted server.
// slots reaches the slot's own server (Relay.target): a standby that restarts is
// down, not promoted, and the session just ends.
func (r *Relay) checkStillStandby(ctx context.Context, slots *pgx.Conn) error {
	if !r.onStandby {
		return nil
	}
	var inRecovery bool
	if err := slots.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil {
		return fmt.Errorf("check that the standby is still a standby: %w", err)
	}
	if !inRecovery {
		return r.promotedError()
	}
	return nil
}

// promotedError says that the standby the slot is on was promoted, and what to do.
func (r *Relay) promotedError() error {
	if len(r.servers) > 1 {
		return &catalog.SetupError{Msg: "the standby of --database-url the slot is on was promoted: its slot goes on, " +
			"but walrelay's bookkeeping must now be kept there; start walrelay again, without --primary-url if it is set " +
			"(it then decodes where the slot is, and keeps its bookkeeping on the server of --database-url that takes " +
			"writes)"}
	}
	return &catalog.SetupError{Msg: "the standby (--database-url) was promoted: its slot goes on, but walrelay's " +
		"bookkeeping must now be kept there, not on --primary-url; start walrelay again (it then keeps everything on " +
		"--database-url) and remove --primary-url"}
}

// booksReceivedPoll is how often awaitBooksOnStandby asks the standby how far it
// has received the primary's WAL.
const booksReceivedPoll = 20 * time.Millisecond

// awaitBooksOnStandby waits until the standby has received the primary's WAL up to
// where it is now, so up to every hand-over, mark and horizon committed so far: the
// slot on the standby confirms an event settled by a hand-over only once a promoted
// standby would have that hand-over too (docs/postgresql.md, "Decoding on a
// standby"). It runs before each confirmation, with its timeout.
func (r *Relay) awaitBooksOnStandby(ctx context.Context, books, slots *pgx.Conn) error {
	if !r.onStandby {
		return nil
	}
	var written string
	if err := books.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&written); err != nil {
		return fmt.Errorf("read the primary's WAL position: %w", err)
	}
	for {
		var received bool
		// Received is flushed on the standby: a promotion replays it. Without a
		// walreceiver (WAL from an archive) what was replayed counts.
		err := slots.QueryRow(ctx, `SELECT GREATEST(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()) >= $1::pg_lsn`,
			written).Scan(&received)
		switch {
		case err != nil && ctx.Err() != nil:
			return fmt.Errorf("the standby has not received walrelay's bookkeeping (the primary's WAL up to %s) in time: "+
				"not confirming; check the replication from --primary-url to --database-url", written)
		case err != nil:
			return fmt.Errorf("read the standby's received WAL: %w", err)
		case received:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the standby has not received walrelay's bookkeeping (the primary's WAL up to %s) in time: "+
				"not confirming; check the replication from --primary-url to --database-url", written)
		case <-time.After(booksReceivedPoll):
		}
	}
}
