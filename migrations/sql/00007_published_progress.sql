-- What a slot has published, recorded once per progress interval instead of once per
-- row (--on-publish progress): every transaction whose xid is below published_xid had
-- finished, and its commit record was before confirmed_lsn, when the relay confirmed
-- that LSN. One row per slot and outbox table; slot_created_at is the slot's
-- incarnation (walrelay_slots.created_at) that wrote it. docs/design.md invariant 10.

-- +goose Up
CREATE TABLE IF NOT EXISTS walrelay_progress (
    slot_name       TEXT        NOT NULL,
    table_oid       OID         NOT NULL,
    slot_created_at TIMESTAMPTZ NOT NULL,
    published_xid   XID8        NOT NULL,
    confirmed_lsn   PG_LSN      NOT NULL,
    recorded_at     TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    PRIMARY KEY (slot_name, table_oid)
);

-- +goose StatementBegin
-- The next xid to be assigned, as a number: what walrelay_full_xid widens against.
-- Callers pass it as (SELECT walrelay_next_xid()), read once per statement.
CREATE OR REPLACE FUNCTION walrelay_next_xid() RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- The 64-bit xid of a row's 32-bit xmin: the one congruent to it in the window
-- [next - 3 * 2^30, next + 2^30), computed with next written once, so that the
-- planner inlines it with next a subquery run once. PostgreSQL keeps every unfrozen xid within 2^31 of
-- the next one, so the answer is exact for every row not frozen; a frozen row older
-- than 3 * 2^30 xids may come out too new, which makes it look unpublished
-- (published again after a slot loss), never the reverse.
CREATE OR REPLACE FUNCTION walrelay_full_xid(x xid, next bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT x::text::bigint + 4294967296 * ((next + 1073741824 + 4294967296 - x::text::bigint) / 4294967296 - 1)
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- The published horizon of an outbox table: the lowest over the slots that stream it,
-- so that a row counts as published only when every slot published it. NULL: none.
-- Callers pass it as (SELECT walrelay_horizon(...)), read once per statement.
CREATE OR REPLACE FUNCTION walrelay_horizon(tbl regclass) RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT min(published_xid::text::bigint) FROM walrelay_progress WHERE table_oid = tbl
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- Whether a row was published: marked, or inserted by a transaction below the horizon
-- and neither handed to the poller nor dead-lettered since (either would have changed
-- its xmin and set one of those columns).
CREATE OR REPLACE FUNCTION walrelay_published(row_xmin xid, processed_at timestamptz, retry_after timestamptz,
    dead_lettered_at timestamptz, horizon bigint, next bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT processed_at IS NOT NULL OR (retry_after IS NULL AND dead_lettered_at IS NULL
        AND walrelay_full_xid(row_xmin, next) < coalesce(horizon, 0))
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION IF EXISTS walrelay_published(xid, timestamptz, timestamptz, timestamptz, bigint, bigint);
DROP FUNCTION IF EXISTS walrelay_horizon(regclass);
DROP FUNCTION IF EXISTS walrelay_full_xid(xid, bigint);
DROP FUNCTION IF EXISTS walrelay_next_xid();
DROP TABLE IF EXISTS walrelay_progress;
