package relay

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// primaryOfHosts is the primary among a multi-host database URL's servers: the same
// URL with target_session_attrs=read-write, which makes pgx connect to the one that
// takes writes. It stands in for --primary-url when the URL lands on a standby
// (docs/postgresql.md, "Decoding on a standby"); "" for a URL with one server.
func primaryOfHosts(dbURL string) string {
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

// primaryURL is --primary-url, or else the read-write server of a multi-host
// --database-url; "" when there is neither.
func (c Config) primaryURL() string {
	if c.PrimaryURL != "" {
		return c.PrimaryURL
	}
	return primaryOfHosts(c.DatabaseURL)
}
