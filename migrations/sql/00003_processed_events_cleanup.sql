-- Consumers delete old processed_events rows by processed_at (consumer.CleanupProcessed).

-- +goose Up
CREATE INDEX IF NOT EXISTS idx_processed_events_processed_at ON processed_events (processed_at);

-- +goose Down
DROP INDEX IF EXISTS idx_processed_events_processed_at;
