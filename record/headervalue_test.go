package record_test

import (
	"testing"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
)

// Header values placed from columns, with Debezium's headers, are what Debezium's
// PostgreSQL connector makes of the column with time.precision.mode adaptive
// (debezium-connector-postgres/src/main/java/io/debezium/connector/postgresql/
// PostgresValueConverter.java convertTimestampWithZone; debezium-connector-common/
// src/main/java/io/debezium/jdbc/TemporalPrecisionMode.java ADAPTIVE; io/debezium/
// time/ZonedTimestamp.java toIsoString), written as text by Kafka Connect's
// SimpleHeaderConverter (Values.convertToString). walrelay's own headers keep the
// column's text.
func TestHeaderValue(t *testing.T) {
	debezium := record.Format{IDHeaderOnly: true}
	for _, tc := range []struct {
		typ, value, want string
	}{
		{"boolean", "t", "true"},
		{"boolean", "f", "false"},
		{"timestamp with time zone", "2024-05-01 14:00:00.123456+02", "2024-05-01T12:00:00.123456Z"},
		{"timestamp with time zone", "2024-05-01 12:00:00+00", "2024-05-01T12:00:00.000000Z"},
		{"timestamp(3) with time zone", "2024-05-01 12:00:00.1+05:30", "2024-05-01T06:30:00.100Z"},
		{"timestamp(0) with time zone", "2024-05-01 12:00:00+00", "2024-05-01T12:00:00Z"},
		// MicroTimestamp at precision 4 to 6 (and none), Timestamp (milliseconds) at 0 to 3.
		{"timestamp without time zone", "2024-05-01 12:00:00.123456", "1714564800123456"},
		{"timestamp(3) without time zone", "2024-05-01 12:00:00.123", "1714564800123"},
		{"date", "2024-05-01", "19844"},
		{"date", "1969-12-31", "-1"},
		// BigDecimal.toString: plain down to 10^-6, scientific below.
		{"numeric(10,2)", "12.50", "12.50"},
		{"numeric(10,2)", "-0.05", "-0.05"},
		{"numeric(20,10)", "0.0000010000", "0.0000010000"},
		{"numeric(20,10)", "0.0000000100", "1.00E-8"},
		{"numeric(20,10)", "-0.0000000001", "-1E-10"},
		{"numeric(10,2)", "NaN", "NaN"},
		// What does not parse keeps its text.
		{"timestamp with time zone", "infinity", "infinity"},
		{"", "t", "t"},
	} {
		h := outbox.Header{Key: "k", Value: tc.value, Type: tc.typ}
		if got, ok := debezium.HeaderValue(h); !ok || string(got) != tc.want {
			t.Errorf("%s %q: %q (written %v), want %q", tc.typ, tc.value, got, ok, tc.want)
		}
		own := record.Format{}
		if got, ok := own.HeaderValue(h); !ok || string(got) != tc.value {
			t.Errorf("walrelay headers, %s %q: %q (written %v), want the text", tc.typ, tc.value, got, ok)
		}
	}
	// A NULL column: a header with a null value, as SimpleHeaderConverter writes a
	// null; walrelay's own headers leave it out, as they always have.
	null := outbox.Header{Key: "k", Type: "boolean", Null: true}
	if v, ok := debezium.HeaderValue(null); !ok || v != nil {
		t.Errorf("Debezium headers, NULL: %q (written %v), want a null value", v, ok)
	}
	if _, ok := (&record.Format{}).HeaderValue(null); ok {
		t.Errorf("walrelay headers, NULL: written, want no header")
	}
}
