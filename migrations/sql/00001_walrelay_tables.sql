-- walrelay's own tables: the consumer-side dedup table and the slots' catch-up record.
-- The outbox table, its indexes, the dead-letter view and the publication are not
-- versioned here: `walrelay migrate` plans them from the catalog (migrations/plan.go),
-- so that it can adopt an existing table of any name and shape. Before that, version 1
-- also created outbox_events, and versions 2 and 4 its pending-by-aggregate and
-- handed-over indexes; databases that applied them have exactly what the plan creates.

-- +goose Up
CREATE TABLE IF NOT EXISTS processed_events (
    event_id     UUID        PRIMARY KEY,
    processed_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
);

-- One row per replication slot the relay created: catchup_done_at stays NULL until every
-- row the slot's exported snapshot could see has been published.
CREATE TABLE IF NOT EXISTS walrelay_slots (
    slot_name       TEXT        PRIMARY KEY,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    catchup_done_at TIMESTAMPTZ
);

-- +goose Down
DROP TABLE IF EXISTS walrelay_slots;
DROP TABLE IF EXISTS processed_events;
