-- Rows the stream handed over to the poller (a failed attempt recorded) and dead
-- letters: a handful, however large the backlog of pending rows. The stream-mode
-- poller, the metrics and the dead-letter commands read them through this index
-- instead of walking every unprocessed row (measured: 370 ms per poll with a
-- 1,000,000-row backlog, against well under 1 ms).

-- +goose Up
CREATE INDEX IF NOT EXISTS idx_outbox_handed_over
    ON outbox_events (created_at)
    WHERE processed_at IS NULL AND (retry_after IS NOT NULL OR dead_lettered_at IS NOT NULL);

-- +goose Down
DROP INDEX IF EXISTS idx_outbox_handed_over;
