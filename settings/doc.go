// Package settings reads walrelay's configuration: each setting known by one name as
// a flag (--NAME), an environment variable (WALRELAY_NAME) and a key of the YAML file
// (--config), in that order of precedence over the defaults; the file's tables list
// (several outbox tables through one slot) and databases list (several databases in
// one process, each entry over the top-level settings). It owns the settings table
// docs/configuration.md is generated from, and the checks that refuse a
// configuration before any connection is opened: every error names the flag,
// variable or file line it came from and says what to set instead.
//
// It builds relay.Config and sinks.Config and serves nothing; it signs no cloud
// credentials itself (the binary's arrive through Settings.Authenticate).
package settings
