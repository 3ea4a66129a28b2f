package main

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
)

// iamAuth is set when the process authenticates to PostgreSQL with RDS IAM tokens
// (--database-auth aws-iam): only then does a refused password get IAM's advice.
var iamAuth atomic.Bool

// explain puts the server's own reason first when a connection to PostgreSQL failed,
// with advice where the reason has one that is right. pgx tries TLS first under the
// default sslmode=prefer and lists every attempt in order, so the real reason
// otherwise comes after a TLS error ("server refused TLS connection") that says
// nothing: that attempt is left out when a later one was made.
func explain(err error) error {
	var connErr *pgconn.ConnectError
	if !errors.As(err, &connErr) {
		return err
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return refused{err: err}
	}
	var advice string
	switch pgErr.Code {
	case "28P01": // invalid_password
		advice = "check the password in the database URL (--database-url, WALRELAY_DATABASE_URL or the config file) or in the pgpass file"
		if iamAuth.Load() {
			advice = "check that the role is granted rds_iam and the AWS identity is allowed rds-db:connect as it (--database-auth aws-iam)"
		}
	case "28000": // invalid_authorization_specification: a role that does not exist, or no pg_hba.conf line
		if strings.HasPrefix(pgErr.Message, "role ") && strings.HasSuffix(pgErr.Message, " does not exist") {
			advice = "check the user name in the database URL, or create the role on the server (CREATE ROLE ... LOGIN)"
		} else {
			advice = "pg_hba.conf on the server has no line that lets this role connect from here this way: add one and reload, " +
				"or connect as a role it allows"
		}
	case "3D000": // invalid_catalog_name
		advice = "check the database name in the database URL, or create the database"
	}
	reason := pgErr.Message
	if advice != "" {
		reason += ": " + advice
	}
	return refused{reason: reason, err: err}
}

// refused is a connection that failed: the server's reason when it gave one, then
// the attempts pgx made that say something, on one line.
type refused struct {
	reason string // "": none from the server
	err    error
}

func (r refused) Error() string {
	listed := r.err.Error()
	if head, rest, several := strings.Cut(strings.ReplaceAll(listed, ":\n\t", "\n\t"), "\n\t"); several {
		all := strings.Split(rest, "\n\t")
		var attempts []string
		for i, a := range all {
			if strings.HasSuffix(a, "tls error: server refused TLS connection") && i < len(all)-1 {
				continue // sslmode=prefer's first try: the next attempt says what happened
			}
			if !slices.Contains(attempts, a) { // TLS, then plain, refused alike
				attempts = append(attempts, a)
			}
		}
		listed = head + ": " + strings.Join(attempts, "; ")
	}
	if r.reason == "" {
		return listed
	}
	return r.reason + " (" + listed + ")"
}

func (r refused) Unwrap() error { return r.err }
