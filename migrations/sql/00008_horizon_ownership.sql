-- Who owns a published horizon (docs/design.md invariant 10). A horizon speaks for
-- the xids of the database it was recorded in. A logical copy (pg_dump and
-- pg_restore, logical replication) brings its row along into a database whose rows
-- have other xids, so a horizon counts only in the cluster and database it was
-- recorded in, or where its row still has the xmin of the transaction that wrote it:
-- a physical copy or pg_upgrade keeps every row's xmin (and the xid counter) while
-- pg_upgrade gives the cluster a new system identifier; a logical copy writes the row
-- anew. One slot streams an outbox table (walrelay_table_slots): a row's hand-over to
-- the poller (retry_after, attempts, processed_at) has room for one destination. And
-- a table counts as covered only once a catch-up pass of its slot read it, so a table
-- that joins a slot's list has no horizon before that. walrelay_full_xid widens over
-- the whole 2^32 window below the next xid.

-- +goose Up
-- +goose StatementBegin
-- This cluster's system identifier, as IDENTIFY_SYSTEM prints it (unsigned).
CREATE OR REPLACE FUNCTION walrelay_system_id() RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN system_identifier < 0 THEN (system_identifier::numeric + 18446744073709551616)::text
        ELSE system_identifier::text END FROM pg_control_system()
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- This database's OID: a database copied within its cluster (CREATE DATABASE ...
-- TEMPLATE, pg_restore into another database) has another.
CREATE OR REPLACE FUNCTION walrelay_database_oid() RETURNS oid
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT oid FROM pg_database WHERE datname = current_database()
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- The 64-bit xid of a row's 32-bit xmin: the one congruent to it in the window
-- [next - 2^32 + 2^20, next + 2^20). A row a statement sees was inserted below next,
-- unless by the statement's own transaction or a version it locked, at most a few
-- xids above; so the answer is exact for every row younger than 2^32 - 2^20 xids,
-- frozen or not. Older rows come out newer than they are (they look unpublished),
-- never older; retirement deletes published rows at 3 * 2^30 xids, long before.
-- The special xids below 3 are older than every other.
CREATE OR REPLACE FUNCTION walrelay_full_xid(x xid, next bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN x::text::bigint < 3 THEN x::text::bigint
        ELSE x::text::bigint + 4294967296 * ((next + 1048575 + 4294967296 - x::text::bigint) / 4294967296 - 1) END
$$;
-- +goose StatementEnd

-- Where each horizon was recorded, and the xid of the transaction that wrote its row.
ALTER TABLE walrelay_progress
    ADD COLUMN IF NOT EXISTS system_id    TEXT,
    ADD COLUMN IF NOT EXISTS database_oid OID,
    ADD COLUMN IF NOT EXISTS recorded_xid XID8;
-- A horizon recorded before this migration belongs where its slot last streamed; one
-- whose slot streamed elsewhere, or that walrelay_slots does not know, counts nowhere.
UPDATE walrelay_progress p SET system_id = coalesce(s.system_id, walrelay_system_id()), database_oid = walrelay_database_oid(),
    recorded_xid = CASE WHEN coalesce(s.system_id, walrelay_system_id()) = walrelay_system_id()
        THEN walrelay_full_xid(p.xmin, walrelay_next_xid())::text::xid8 END
FROM walrelay_slots s WHERE s.slot_name = p.slot_name AND p.system_id IS NULL;

-- +goose StatementBegin
-- Whether a walrelay_progress row speaks for this database: recorded in this cluster
-- and database, or still with the xmin of the transaction that wrote it (a physical
-- copy, pg_upgrade).
CREATE OR REPLACE FUNCTION walrelay_recorded_here(system_id text, database_oid oid, recorded_xid xid8, row_xmin xid)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(system_id = walrelay_system_id() AND database_oid = walrelay_database_oid(), false)
        OR coalesce(walrelay_full_xid(row_xmin, walrelay_next_xid()) = recorded_xid::text::bigint, false)
$$;
-- +goose StatementEnd

-- The slot that streams each outbox table, and since when a catch-up pass of the
-- slot covers the table: NULL while the table has rows the slot's stream never carried.
CREATE TABLE IF NOT EXISTS walrelay_table_slots (
    table_oid  OID         PRIMARY KEY,
    slot_name  TEXT        NOT NULL,
    claimed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    covered_at TIMESTAMPTZ
);
-- The tables of the slots walrelay streams here now, covered since their pass; where
-- two slots stream one table, the older slot keeps it and the other's relay is
-- refused at its next start.
INSERT INTO walrelay_table_slots (table_oid, slot_name, covered_at)
SELECT t.oid, s.slot_name, s.catchup_done_at
FROM walrelay_slots s
JOIN pg_replication_slots r ON r.slot_name = s.slot_name AND r.database = current_database()
CROSS JOIN LATERAL (SELECT s.table_oid AS oid
    UNION SELECT value::oid FROM jsonb_each_text(coalesce(s.table_oids, '{}'::jsonb))) t
WHERE t.oid IS NOT NULL AND EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = t.oid)
ORDER BY s.created_at, s.slot_name
ON CONFLICT (table_oid) DO NOTHING;

-- +goose StatementBegin
-- The published horizon of an outbox table: the one the slot that streams it
-- recorded, where it speaks for this database. NULL: none.
CREATE OR REPLACE FUNCTION walrelay_horizon(tbl regclass) RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT p.published_xid::text::bigint FROM walrelay_table_slots c
    JOIN walrelay_progress p ON p.slot_name = c.slot_name AND p.table_oid = c.table_oid
    WHERE c.table_oid = tbl AND walrelay_recorded_here(p.system_id, p.database_oid, p.recorded_xid, p.xmin)
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION walrelay_horizon(tbl regclass) RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT min(published_xid::text::bigint) FROM walrelay_progress WHERE table_oid = tbl
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION walrelay_full_xid(x xid, next bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT x::text::bigint + 4294967296 * ((next + 1073741824 + 4294967296 - x::text::bigint) / 4294967296 - 1)
$$;
-- +goose StatementEnd
DROP TABLE IF EXISTS walrelay_table_slots;
DROP FUNCTION IF EXISTS walrelay_recorded_here(text, oid, xid8, xid);
ALTER TABLE walrelay_progress DROP COLUMN IF EXISTS system_id, DROP COLUMN IF EXISTS database_oid,
    DROP COLUMN IF EXISTS recorded_xid;
DROP FUNCTION IF EXISTS walrelay_database_oid();
DROP FUNCTION IF EXISTS walrelay_system_id();
