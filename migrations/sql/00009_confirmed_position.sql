-- The newest LSN a relay confirmed on a slot, kept in the database the slot decodes
-- (docs/design.md invariants 1 and 8): every transaction that ends at or below
-- confirmed_lsn was acked by the broker or handed over with its bookkeeping committed.
-- PostgreSQL saves a logical slot's confirmed position only now and then (at a
-- checkpoint, or a restartpoint on a standby), so after a restart or a crash of the
-- server the slot may be behind; the relay then starts streaming from this row, for
-- the same slot incarnation (slot_created_at, walrelay_slots.created_at), cluster
-- (system_id), database and timeline only. One row per slot, written at most once per
-- progress interval, and only when events were confirmed since the last write.

-- +goose Up
CREATE TABLE IF NOT EXISTS walrelay_confirmed (
    slot_name       TEXT        PRIMARY KEY,
    slot_created_at TIMESTAMPTZ NOT NULL,
    system_id       TEXT        NOT NULL,
    database_name   TEXT        NOT NULL,
    timeline        INT         NOT NULL,
    confirmed_lsn   PG_LSN      NOT NULL,
    recorded_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE IF EXISTS walrelay_confirmed;
