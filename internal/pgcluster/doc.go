// Package pgcluster starts throwaway PostgreSQL clusters for the demo and the
// integration tests.
//
// It owns one temporary directory per cluster (data directory, unix socket,
// server log) and the postmaster process it starts there. A cluster runs with
// wal_level=logical, trust authentication for the superuser "postgres", and
// durability switched off (fsync, synchronous_commit, full_page_writes), so it
// is fast and must never hold data anyone cares about.
//
// Guarantees:
//
//   - [Start] returns only once the server accepts connections on
//     127.0.0.1:[Cluster.Port]; on any failure it returns an error carrying the
//     last lines of the initdb output or server log and removes the directory.
//   - The postmaster runs in its own process group, so a Ctrl-C delivered to
//     the caller's process group does not reach it; [Cluster.Stop] and
//     [Cluster.Close] decide how it stops (fast shutdown, then SIGKILL after
//     30s). If the calling process dies without Close, the postmaster gets
//     SIGQUIT (immediate shutdown) but the directory is left behind.
//   - [Cluster.Stop] keeps the data directory; [Cluster.StartAgain] brings the
//     same cluster back on the same port.
//   - [Cluster.Close] is idempotent and removes the directory.
//
// When the process runs as root, initdb and postgres run as the "postgres" OS
// user, which must exist and must be able to traverse os.TempDir().
//
// [BinDir] finds the server binaries: $WALRELAY_PG_BINDIR, else the major
// version $WALRELAY_PG_VERSION names (the repository's .pg/<major>/bin, which
// `make setup-matrix` installs, or Debian's), else the newest
// /usr/lib/postgresql/*/bin, else initdb on PATH. It returns an error wrapping
// [ErrNoBinaries] when there are none, so tests can skip or fail on it; a
// version asked for by name and missing is an error that does not wrap it.
// [Options.BinDir] chooses the binaries of one cluster instead. [Start] reads
// the server's version once it is ready, logs it, and fails when
// $WALRELAY_PG_VERSION names another major version.
package pgcluster
