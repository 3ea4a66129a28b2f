-- The outbox table from the article, plus the bookkeeping columns the poller uses
-- (retry_after, last_error, dead_lettered_at), the consumer-side dedup table, the
-- dead-letter view and an insert-only publication for the relay.

-- +goose Up
CREATE TABLE IF NOT EXISTS outbox_events (
    id               UUID         PRIMARY KEY DEFAULT gen_random_uuid(),
    aggregate_type   VARCHAR(100) NOT NULL,
    aggregate_id     VARCHAR(100) NOT NULL,
    event_type       VARCHAR(100) NOT NULL,
    payload          JSONB        NOT NULL,
    attempts         INT          NOT NULL DEFAULT 0,
    created_at       TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    processed_at     TIMESTAMPTZ,
    retry_after      TIMESTAMPTZ,
    last_error       TEXT,
    dead_lettered_at TIMESTAMPTZ
);

-- Only pending rows are indexed, so the index stays small however many events were published.
CREATE INDEX IF NOT EXISTS idx_outbox_unprocessed
    ON outbox_events (created_at)
    WHERE processed_at IS NULL;

CREATE TABLE IF NOT EXISTS processed_events (
    event_id     UUID        PRIMARY KEY,
    processed_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
);

CREATE OR REPLACE VIEW outbox_dead_letters AS
SELECT *
FROM outbox_events
WHERE dead_lettered_at IS NOT NULL
  AND processed_at IS NULL
ORDER BY created_at;

-- One row per replication slot the relay created: catchup_done_at stays NULL until every
-- row the slot's exported snapshot could see has been published.
CREATE TABLE IF NOT EXISTS walrelay_slots (
    slot_name       TEXT        PRIMARY KEY,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    catchup_done_at TIMESTAMPTZ
);

-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'walrelay') THEN
        CREATE PUBLICATION walrelay FOR TABLE outbox_events WITH (publish = 'insert');
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP PUBLICATION IF EXISTS walrelay;
DROP TABLE IF EXISTS walrelay_slots;
DROP VIEW IF EXISTS outbox_dead_letters;
DROP TABLE IF EXISTS processed_events;
DROP TABLE IF EXISTS outbox_events;
