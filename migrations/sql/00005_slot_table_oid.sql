-- The outbox table a slot streams, by OID: a table dropped and created again, or
-- renamed and swapped, under the same name is another table, whose inserts before it
-- joined the publication are not in the slot.

-- +goose Up
ALTER TABLE walrelay_slots ADD COLUMN IF NOT EXISTS table_oid OID;

-- +goose Down
ALTER TABLE walrelay_slots DROP COLUMN IF EXISTS table_oid;
