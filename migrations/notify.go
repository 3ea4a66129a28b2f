package migrations

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// notifySQL is the article's LISTEN/NOTIFY trigger, which wakes a poll-only relay as
// soon as a row is inserted. It is optional (`walrelay migrate --notify`): a NOTIFY
// per insert costs the writers a little, and the stream does not need it.
const notifySQL = `
CREATE OR REPLACE FUNCTION walrelay_notify_outbox_insert() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('outbox_event', NEW.id::text);
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

DROP TRIGGER IF EXISTS walrelay_outbox_insert_notify ON outbox_events;
CREATE TRIGGER walrelay_outbox_insert_notify
    AFTER INSERT ON outbox_events
    FOR EACH ROW EXECUTE FUNCTION walrelay_notify_outbox_insert();
`

// InstallNotify creates (or replaces) the insert trigger that notifies channel
// outbox_event.
func InstallNotify(ctx context.Context, databaseURL string) error {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("connect to postgresql: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, notifySQL); err != nil {
		return fmt.Errorf("install notify trigger: %w", err)
	}
	return nil
}
