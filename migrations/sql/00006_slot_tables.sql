-- The identity of every outbox table a slot streams, beyond the first (table_oid), for
-- a relay that streams several: a JSON object from schema.name to the table's OID.

-- +goose Up
ALTER TABLE walrelay_slots ADD COLUMN IF NOT EXISTS table_oids JSONB;

-- +goose Down
ALTER TABLE walrelay_slots DROP COLUMN IF EXISTS table_oids;
