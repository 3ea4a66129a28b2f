package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// StartStandby makes a physical standby of c from a cold copy of its data directory
// (the server binaries ship no pg_basebackup): it stops c cleanly, copies the
// directory, starts c again, and starts the copy streaming from c through the
// physical slot slot, which it creates on c first. settings go into the standby's
// postgresql.conf (e.g. sync_replication_slots). The copy keeps none of c's
// replication slots.
func (c *Cluster) StartStandby(ctx context.Context, slot string, settings map[string]string) (*Cluster, error) {
	conn, err := pgconn.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return nil, fmt.Errorf("standby: connect to the primary: %w", err)
	}
	_, err = conn.Exec(ctx, "SELECT pg_create_physical_replication_slot('"+slot+"', true)").ReadAll()
	conn.Close(context.Background())
	if err != nil {
		return nil, fmt.Errorf("standby: create physical slot %s: %w", slot, err)
	}
	if err := c.Stop(); err != nil {
		return nil, fmt.Errorf("standby: stop the primary for a cold copy: %w", err)
	}
	dir, err := os.MkdirTemp("", "walrelay-pg-standby-")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("standby: create directory: %w", err), c.StartAgain(ctx))
	}
	s := &Cluster{dir: dir, binDir: c.binDir, as: c.as, logf: c.logf}
	err = s.copyFrom(ctx, c, slot, settings)
	if err2 := c.StartAgain(ctx); err == nil {
		err = err2
	}
	if err == nil {
		for attempt := 1; attempt <= portAttempts; attempt++ {
			if s.port, err = freePort(); err != nil {
				break
			}
			s.mu.Lock()
			err = s.startLocked(ctx)
			s.mu.Unlock()
			if !errors.Is(err, errPortInUse) {
				break
			}
		}
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("standby: %w", err), s.removeDir())
	}
	c.logf("pgcluster: standby of port %d ready on port %d", c.port, s.port)
	return s, nil
}

// copyFrom copies the stopped primary's data directory and turns the copy into a
// standby of it.
func (s *Cluster) copyFrom(ctx context.Context, primary *Cluster, slot string, settings map[string]string) error {
	cp := exec.CommandContext(ctx, "cp", "-a", primary.dataDir(), s.dataDir())
	if out, err := cp.CombinedOutput(); err != nil {
		return withOutput(fmt.Errorf("copy the data directory: %w", err), "cp output", string(out))
	}
	slots, _ := filepath.Glob(filepath.Join(s.dataDir(), "pg_replslot", "*"))
	for _, p := range slots {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("remove the copied slot %s: %w", p, err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.dataDir(), "standby.signal"), nil, 0o600); err != nil {
		return fmt.Errorf("write standby.signal: %w", err)
	}
	conf := map[string]string{
		"unix_socket_directories": s.dir,
		"primary_conninfo": "host=127.0.0.1 port=" + strconv.Itoa(primary.port) +
			" user=postgres dbname=postgres application_name=standby",
		"primary_slot_name":    slot,
		"hot_standby":          "on",
		"hot_standby_feedback": "on",
	}
	maps.Copy(conf, settings)
	f, err := os.OpenFile(filepath.Join(s.dataDir(), "postgresql.conf"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("open the standby's postgresql.conf: %w", err)
	}
	_, err = f.WriteString(confLines(conf))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write the standby's postgresql.conf: %w", err)
	}
	return s.as.prepareDir(s.dir)
}

// Promote ends recovery on a standby and waits until it accepts writes.
func (c *Cluster) Promote(ctx context.Context) error {
	conn, err := pgconn.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("promote: connect: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_promote(true, 60)").ReadAll(); err != nil {
		return fmt.Errorf("promote: %w", err)
	}
	return nil
}

// Crash stops the server at once, as a power cut would: SIGKILL to the postmaster's
// process group, no checkpoint, no goodbye to clients or standbys.
func (c *Cluster) Crash() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	srv := c.mu.srv
	if srv == nil {
		return nil
	}
	c.mu.srv = nil
	if err := syscall.Kill(-srv.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("crash postgres: %w", err)
	}
	select {
	case <-srv.exited:
		return nil
	case <-time.After(stopTimeout):
		return errors.New("crash postgres: it did not exit after SIGKILL")
	}
}
