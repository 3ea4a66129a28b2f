package replication

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/walrelay/walrelay/internal/redact"
)

const readBufferSize = 64 << 10

// Conn is a replication connection (replication=database) to PostgreSQL. It is used
// by one goroutine at a time.
type Conn struct {
	pg *pgconn.PgConn
}

// RenderLikeStream sets the session settings that decide how values are written as
// text: the stream's, so that a column the poller reads as text (a placed header)
// has the text the decoder got for it, and timestamps are in the form the decoder
// parses.
func RenderLikeStream(params map[string]string) {
	params["DateStyle"] = "ISO"
	params["TimeZone"] = "UTC"
	params["IntervalStyle"] = "postgres"
	params["bytea_output"] = "hex" // the decoder reads bytea payloads in hex
}

// Connect opens a replication connection. Timestamps in the stream are rendered in
// ISO style and UTC, the form the decoder parses.
func Connect(ctx context.Context, databaseURL string) (*Conn, error) {
	return ConnectWithPassword(ctx, databaseURL, nil)
}

// ConnectWithPassword is Connect with a password asked for just before connecting,
// replacing the URL's when password is not nil: a token that expires (an AWS RDS IAM
// token lives 15 minutes) is fresh for every connection, reconnects included.
func ConnectWithPassword(ctx context.Context, databaseURL string, password func(context.Context) (string, error)) (*Conn, error) {
	cfg, err := pgconn.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", redact.Error(err, databaseURL))
	}
	if password != nil {
		if cfg.Password, err = password(ctx); err != nil {
			return nil, fmt.Errorf("database password for the replication connection: %w", err)
		}
	}
	cfg.RuntimeParams["replication"] = "database"
	RenderLikeStream(cfg.RuntimeParams)
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "walrelay"
	}
	// A walsender whose client vanished silently keeps the slot active; keepalives
	// end it within seconds so that a standby can stream.
	TuneKeepalives(cfg)
	// pgproto3 reads into an 8 KiB buffer; a larger one under it lets one read take
	// a whole batch (see readBatching).
	cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		return pgproto3.NewFrontend(bufio.NewReaderSize(r, readBufferSize), w)
	}
	pg, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open replication connection: %w", err)
	}
	return &Conn{pg: pg}, nil
}

// Close closes the connection, waiting at most a few seconds for a clean goodbye.
func (c *Conn) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = c.pg.Close(ctx)
}

// SlotCreation is what CREATE_REPLICATION_SLOT returns.
type SlotCreation struct {
	ConsistentPoint pglogrepl.LSN
	// SnapshotName can be imported with SET TRANSACTION SNAPSHOT until the next
	// command on this connection: it sees exactly the rows committed before the slot.
	SnapshotName string
}

// ServerMajor is the server's major version (17 for 17.2).
func (c *Conn) ServerMajor() int { return serverMajor(c.pg.ParameterStatus("server_version")) }

// MessagesMajor is the first major version whose pgoutput streams logical messages.
const MessagesMajor = 14

// FailoverSlots is the first major version whose slots can be failover slots.
const FailoverSlots = 17

// CreateSlot creates a permanent pgoutput slot and exports its snapshot; with
// failover on a server that has them, a failover slot.
func (c *Conn) CreateSlot(ctx context.Context, slot string, failover bool) (SlotCreation, error) {
	var res pglogrepl.CreateReplicationSlotResult
	var err error
	if failover && c.ServerMajor() >= FailoverSlots {
		res, err = pglogrepl.ParseCreateReplicationSlot(c.pg.Exec(ctx, "CREATE_REPLICATION_SLOT "+slot+
			" LOGICAL pgoutput (SNAPSHOT 'export', FAILOVER true)"))
	} else {
		res, err = pglogrepl.CreateReplicationSlot(ctx, c.pg, slot, "pgoutput",
			pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "EXPORT_SNAPSHOT"})
	}
	if err != nil {
		return SlotCreation{}, fmt.Errorf("create replication slot %s: %w", slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		return SlotCreation{}, fmt.Errorf("create replication slot %s: consistent point: %w", slot, err)
	}
	return SlotCreation{ConsistentPoint: lsn, SnapshotName: res.SnapshotName}, nil
}

// DropSlot drops the slot, waiting for it if another connection still holds it.
func (c *Conn) DropSlot(ctx context.Context, slot string) error {
	if err := pglogrepl.DropReplicationSlot(ctx, c.pg, slot, pglogrepl.DropReplicationSlotOptions{Wait: true}); err != nil {
		return fmt.Errorf("drop replication slot %s: %w", slot, err)
	}
	return nil
}

// serverMajor reads the major version from server_version ("17.2", "14.15 (Debian)").
func serverMajor(version string) int {
	n := 0
	for _, r := range version {
		if r < '0' || r > '9' {
			break
		}
		n = 10*n + int(r-'0')
	}
	return n
}
