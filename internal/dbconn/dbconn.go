// Package dbconn is how the relay and the commands beside it (package ops) reach
// PostgreSQL outside the stream: one connection with the password hook, whether a
// server is a standby, and the primary among a multi-host URL's servers. Both
// import it, so that they decide alike where the bookkeeping lives
// (docs/postgresql.md, "Decoding on a standby").
package dbconn

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/redact"
)

// Password is relay.Config.DatabasePassword: called before each new connection,
// its result is that connection's password in place of the URL's. Nil: the URL's.
type Password func(ctx context.Context) (string, error)

// SetPassword puts the password pw gives into a connection's configuration just
// before it connects; with pw nil the URL's stays.
func SetPassword(ctx context.Context, pw Password, cfg *pgconn.Config) error {
	if pw == nil {
		return nil
	}
	p, err := pw(ctx)
	if err != nil {
		return fmt.Errorf("database password (--database-auth): %w", err)
	}
	cfg.Password = p
	return nil
}

// Connect opens one connection on url with pw's password.
func Connect(ctx context.Context, url string, pw Password) (*pgx.Conn, error) {
	connCfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", ParseError(err, url))
	}
	if err := SetPassword(ctx, pw, &connCfg.Config); err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, connCfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgresql: %w", err)
	}
	return conn, nil
}

// InRecovery says whether conn's server is a standby.
func InRecovery(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var standby bool
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&standby); err != nil {
		return false, fmt.Errorf("find out whether the database is a standby: %w", err)
	}
	return standby, nil
}

// PrimaryOfHosts is the primary among a multi-host database URL's servers: the same
// URL with target_session_attrs=read-write, which makes pgx connect to the one that
// takes writes. It stands in for --primary-url when the URL lands on a standby
// (docs/postgresql.md, "Decoding on a standby"); "" for a URL with one server.
func PrimaryOfHosts(dbURL string) string {
	cfg, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		return ""
	}
	servers := map[string]bool{fmt.Sprintf("%s:%d", cfg.Host, cfg.Port): true}
	for _, fb := range cfg.Fallbacks { // sslmode=prefer lists each server twice
		servers[fmt.Sprintf("%s:%d", fb.Host, fb.Port)] = true
	}
	if len(servers) < 2 {
		return ""
	}
	if strings.HasPrefix(dbURL, "postgres://") || strings.HasPrefix(dbURL, "postgresql://") {
		u, err := url.Parse(dbURL)
		if err != nil {
			return ""
		}
		q := u.Query()
		q.Set("target_session_attrs", "read-write")
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dbURL + " target_session_attrs=read-write" // keyword/value form: the last setting counts
}

// PrimaryURL is --primary-url, or else the read-write server of a multi-host
// --database-url; "" when there is neither.
func PrimaryURL(primaryURL, dbURL string) string {
	if primaryURL != "" {
		return primaryURL
	}
	return PrimaryOfHosts(dbURL)
}

// ParseError explains why a database URL does not parse. A URL of another scheme
// (mysql://) gets the schemes PostgreSQL's URLs take, rather than the driver's
// "failed to parse as keyword/value", which it is not; every other error keeps the
// driver's words. The URL is shown through the one redaction.
func ParseError(err error, raw string) error {
	scheme, _, ok := strings.Cut(raw, "://")
	if ok && scheme != "postgres" && scheme != "postgresql" && !strings.ContainsAny(scheme, " =") {
		return fmt.Errorf("%s is not a PostgreSQL URL: the scheme must be postgres:// or postgresql:// "+
			"(or give keyword/value settings: host=... dbname=... user=...)", redact.URL(raw))
	}
	return redact.Error(err, raw)
}
