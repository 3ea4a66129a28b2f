package main

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// explain puts the server's own reason first when a connection to PostgreSQL was
// refused at authentication. pgx tries TLS first under the default sslmode=prefer
// and lists every attempt in order, so a wrong password otherwise reads as a TLS
// error ("server refused TLS connection") with the real reason on a later line.
func explain(err error) error {
	var connErr *pgconn.ConnectError
	var pgErr *pgconn.PgError
	if !errors.As(err, &connErr) || !errors.As(err, &pgErr) {
		return err
	}
	var advice string
	switch pgErr.Code {
	case "28P01": // invalid_password
		advice = "check the password in the database URL (--database-url, WALRELAY_DATABASE_URL or the config file) or in the pgpass file; " +
			"with --database-auth aws-iam, check that the role is granted rds_iam and the AWS identity is allowed rds-db:connect as it"
	case "28000": // invalid_authorization_specification: no pg_hba.conf line, or the method refused
		advice = "pg_hba.conf on the server has no line that lets this role connect from here this way: add one and reload, " +
			"or connect as a role it allows"
	default:
		return err
	}
	return refused{reason: pgErr.Message + ": " + advice, err: err}
}

// refused is a connection refused at authentication: the reason, then every
// attempt pgx made, on one line.
type refused struct {
	reason string
	err    error
}

func (r refused) Error() string {
	attempts := strings.ReplaceAll(strings.ReplaceAll(r.err.Error(), ":\n\t", ": "), "\n\t", "; ")
	return r.reason + " (" + attempts + ")"
}

func (r refused) Unwrap() error { return r.err }
