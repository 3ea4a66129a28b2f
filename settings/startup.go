package settings

import (
	"log/slog"

	"github.com/walrelay/walrelay/internal/buildinfo"
	"github.com/walrelay/walrelay/internal/redact"
	"github.com/walrelay/walrelay/relay"
)

// logStartup logs the one line that says what this run is and where it reads and
// publishes, before any connection is opened. Every URL in it is redacted
// (internal/redact): no password, token or secret parameter. The URLs are
// database_url and primary_url: "database" is a databases entry's name, which the
// logger of a databases list already carries.
func (s *Settings) logStartup(logger *slog.Logger, cfg relay.Config) {
	b := buildinfo.Read()
	tables := make([]string, 0, len(cfg.OutboxTables()))
	for _, t := range cfg.OutboxTables() {
		tables = append(tables, t.Table)
	}
	args := []any{"version", b.Version, "revision", b.Revision, "mode", string(cfg.Mode),
		"on_publish", string(cfg.OnPublishMode()), "delivery", string(cfg.Delivery),
		"sink", string(s.Sinks.Kind), "brokers", s.Sinks.Addresses(), "database_url", redact.URL(cfg.DatabaseURL)}
	if cfg.PrimaryURL != "" {
		args = append(args, "primary_url", redact.URL(cfg.PrimaryURL))
	}
	if cfg.Mode != relay.ModePoll {
		args = append(args, "slot", cfg.Slot, "publication", cfg.Publication)
	}
	args = append(args, "tables", tables)
	logger.Info("walrelay starting", args...)
}
