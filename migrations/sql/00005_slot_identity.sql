-- What a slot streams and where: the outbox table by OID (a table dropped and created
-- again, or renamed and swapped, under the same name is another table), the cluster's
-- system identifier and timeline the relay last streamed it on (a missing slot on a
-- newer timeline of the same system is a failover that did not carry the slot), and
-- when and why the relay last had to replace it (shown by `walrelay status`).

-- +goose Up
ALTER TABLE walrelay_slots
    ADD COLUMN IF NOT EXISTS table_oid       OID,
    ADD COLUMN IF NOT EXISTS system_id       TEXT,
    ADD COLUMN IF NOT EXISTS timeline        INT,
    ADD COLUMN IF NOT EXISTS replaced_at     TIMESTAMPTZ,
    ADD COLUMN IF NOT EXISTS replaced_reason TEXT;

-- +goose Down
ALTER TABLE walrelay_slots
    DROP COLUMN IF EXISTS table_oid,
    DROP COLUMN IF EXISTS system_id,
    DROP COLUMN IF EXISTS timeline,
    DROP COLUMN IF EXISTS replaced_at,
    DROP COLUMN IF EXISTS replaced_reason;
