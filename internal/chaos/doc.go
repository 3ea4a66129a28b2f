// Package chaos holds walrelay's fault-injection and huge-transaction soak tests (tests only).
package chaos
