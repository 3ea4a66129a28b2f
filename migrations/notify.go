package migrations

import (
	"context"
	"fmt"

	"github.com/walrelay/walrelay/outbox"
)

// notifySQL is the article's LISTEN/NOTIFY trigger, which wakes a poll-only relay as
// soon as a row is inserted. It is optional (`walrelay migrate --notify`): a NOTIFY
// per insert costs the writers a little, and the stream does not need it.
func notifySQL(table, idColumn string) string {
	schema, name := splitTable(table)
	t := ident(schema, name)
	return `
CREATE OR REPLACE FUNCTION walrelay_notify_outbox_insert() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('outbox_event', NEW.` + ident(idColumn) + `::text);
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

DROP TRIGGER IF EXISTS walrelay_outbox_insert_notify ON ` + t + `;
CREATE TRIGGER walrelay_outbox_insert_notify
    AFTER INSERT ON ` + t + `
    FOR EACH ROW EXECUTE FUNCTION walrelay_notify_outbox_insert();
`
}

// InstallNotify creates (or replaces) the insert trigger that notifies channel
// outbox_event, on the default table outbox_events.
func InstallNotify(ctx context.Context, databaseURL string) error {
	return InstallNotifyOn(ctx, databaseURL, outbox.DefaultTable, outbox.DefaultColumns().ID)
}

// InstallNotifyOn is InstallNotify for another table, whose id column is idColumn.
func InstallNotifyOn(ctx context.Context, databaseURL, table, idColumn string) error {
	return InstallNotifyWith(ctx, Options{DatabaseURL: databaseURL}, table, idColumn)
}

// InstallNotifyWith is InstallNotifyOn connecting as o says (its URL and Password).
func InstallNotifyWith(ctx context.Context, o Options, table, idColumn string) error {
	conn, err := o.connect(ctx)
	if err != nil {
		return fmt.Errorf("connect to postgresql: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, notifySQL(table, idColumn)); err != nil {
		return fmt.Errorf("install notify trigger: %w", err)
	}
	return nil
}
