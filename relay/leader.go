package relay

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/redact"
	"github.com/walrelay/walrelay/replication"
)

// leaderCheckInterval is how often a leader checks that it still holds the lock, and
// how often a standby tries to take it.
const leaderCheckInterval = time.Second

// leaderKey is the advisory lock key for a slot: one leader per slot per cluster.
func leaderKey(slot string) int64 {
	h := fnv.New64a()
	h.Write([]byte("walrelay/slot/" + slot))
	return int64(h.Sum64())
}

// connect opens a session, on the server the slot is on (Relay.target), whose silent
// loss ends on both sides within seconds (see replication.TuneKeepalives): the server
// then releases what the session held, the advisory lock above all, and this side's
// next use of it fails.
func (r *Relay) connect(ctx context.Context) (*pgx.Conn, error) {
	return r.connectTo(ctx, r.target, "--database-url")
}

// connectBooks is connect to where walrelay's bookkeeping lives (Config.booksURL).
func (r *Relay) connectBooks(ctx context.Context) (*pgx.Conn, error) {
	if r.onStandby {
		return r.connectTo(ctx, r.cfg.PrimaryURL, "--primary-url")
	}
	return r.connect(ctx)
}

// connectTo is connect to url, which setting names.
func (r *Relay) connectTo(ctx context.Context, url, setting string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url (check %s): %w", setting, redact.Error(err, url))
	}
	replication.TuneKeepalives(&cfg.Config)
	replication.RenderLikeStream(cfg.RuntimeParams) // the catch-up pass reads placed columns as the stream sends them
	if err := r.cfg.setPassword(ctx, &cfg.Config); err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// acquireLeadership blocks until this instance holds the slot's advisory lock, on a
// connection of its own, and returns that connection. Standbys try every second, on
// the connection they keep while they wait (a new one only when it fails): a
// connection a second per database would be most of a standby's idle cost.
func (r *Relay) acquireLeadership(ctx context.Context) (*pgx.Conn, error) {
	key := leaderKey(r.cfg.Slot)
	standbyLogged := false
	var conn *pgx.Conn
	for {
		var err error
		if conn == nil {
			conn, err = r.connect(ctx)
		}
		if err == nil {
			var got bool
			if err = conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&got); err == nil && got {
				if standbyLogged {
					r.log.Info("took over leadership", "slot", r.cfg.Slot)
				}
				return conn, nil
			}
			if err != nil {
				conn.Close(context.Background())
				conn = nil
			}
		}
		if ctx.Err() != nil {
			if conn != nil {
				conn.Close(context.Background())
			}
			return nil, ctx.Err()
		}
		if err != nil {
			return nil, err
		}
		r.standby.Store(true)
		if !standbyLogged {
			r.log.Info("standby: another instance streams this slot; taking over when it stops", "slot", r.cfg.Slot)
			standbyLogged = true
		}
		select {
		case <-time.After(leaderCheckInterval):
		case <-ctx.Done():
			conn.Close(context.Background())
			return nil, ctx.Err()
		}
	}
}

// holdLeadership returns a context that ends when ctx does or when the lock's
// connection stops answering: a leader that may have lost its lock stops streaming.
// The returned stop ends the watch and waits for it, after which conn is free again.
func (r *Relay) holdLeadership(ctx context.Context, conn *pgx.Conn) (context.Context, func()) {
	leadCtx, cancel := context.WithCancel(ctx)
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		ticker := newAlignedTicker(leaderCheckInterval)
		defer ticker.stop()
		for {
			select {
			case <-leadCtx.Done():
				return
			case <-ticker.C():
			}
			pingCtx, stop := context.WithTimeout(leadCtx, 2*leaderCheckInterval)
			err := conn.Ping(pingCtx)
			stop()
			ticker.rearm()
			if err != nil && leadCtx.Err() == nil {
				r.log.Error("lost the leadership lock's connection; stopping the stream so that another instance can take over",
					"slot", r.cfg.Slot, "err", fmt.Errorf("ping leader session: %w", err))
				r.lostLeadership.Store(true)
				cancel()
				return
			}
		}
	}()
	return leadCtx, func() { cancel(); <-watching }
}
