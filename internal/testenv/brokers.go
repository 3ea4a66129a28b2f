package testenv

import (
	"testing"

	"github.com/walrelay/walrelay/internal/testenv/brokers"
)

// NATS starts a nats-server with JetStream of the test's own and returns its URL
// (see package brokers: tests never use the machine's servers).
func NATS(t testing.TB) string {
	t.Helper()
	return brokers.NATS(t)
}

// Redis starts a redis-server of the test's own and returns its URL.
func Redis(t testing.TB) string {
	t.Helper()
	return brokers.Redis(t)
}

// RabbitMQ returns the URL of the test binary's own RabbitMQ node, started on first
// use and stopped by Main.
func RabbitMQ(t testing.TB) string {
	t.Helper()
	return brokers.RabbitMQ(t)
}
