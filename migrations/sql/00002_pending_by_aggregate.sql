-- Pending rows by aggregate: the poller checks, for each row it is about to publish,
-- that no earlier pending row of the same aggregate is held by another poller.

-- +goose Up
CREATE INDEX IF NOT EXISTS idx_outbox_pending_aggregate
    ON outbox_events (aggregate_type, aggregate_id, created_at)
    WHERE processed_at IS NULL;

-- +goose Down
DROP INDEX IF EXISTS idx_outbox_pending_aggregate;
