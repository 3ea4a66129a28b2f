package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Upgrade runs pg_upgrade on the cluster in place, into a new data directory made by
// initdb with the same binaries and postgresql.conf (linking the data files, which
// the old directory then gives up), and starts it on the same port:
// rows keep their xmin and the cluster its xid counter and database OIDs, but it
// gets a new system identifier, and logical replication slots are not carried
// before PostgreSQL 17. The cluster must be running, and is again on return.
func (c *Cluster) Upgrade(ctx context.Context) error {
	if err := c.Stop(); err != nil {
		return err
	}
	old, next := c.dataDir(), filepath.Join(c.dir, "data.next")
	run := func(name string, args ...string) error {
		var out bytes.Buffer
		cmd := c.as.command(c.dir, filepath.Join(c.binDir, name), args...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		if err := waitCtx(ctx, cmd.Process.Pid, cmd.Wait); err != nil {
			return withOutput(fmt.Errorf("%s: %w", name, err), name+" output", out.String())
		}
		return nil
	}
	err := run("initdb", "--pgdata", next, "--username", "postgres", "--auth", "trust", "--encoding", "UTF8",
		"--locale", "C", "--no-sync")
	if err == nil {
		var conf []byte
		if conf, err = os.ReadFile(filepath.Join(old, "postgresql.conf")); err == nil {
			path := filepath.Join(next, "postgresql.conf")
			if err = os.WriteFile(path, conf, 0o600); err == nil {
				err = c.as.chown(path)
			}
		}
	}
	var oldPort, newPort int
	if err == nil {
		oldPort, err = freePort()
	}
	if err == nil {
		newPort, err = freePort()
	}
	if err == nil {
		err = run("pg_upgrade", "--old-bindir", c.binDir, "--new-bindir", c.binDir, "--old-datadir", old,
			"--new-datadir", next, "--old-port", strconv.Itoa(oldPort), "--new-port", strconv.Itoa(newPort),
			"--socketdir", c.dir, "--username", "postgres", "--link", "--no-sync")
	}
	if err == nil {
		err = errors.Join(os.RemoveAll(old), os.Rename(next, old))
	}
	if err != nil {
		return fmt.Errorf("upgrade: %w", err)
	}
	return c.StartAgain(ctx)
}
