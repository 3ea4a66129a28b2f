package record

import (
	"strconv"
	"strings"
	"time"

	"github.com/walrelay/walrelay/outbox"
)

// HeaderValue is the value of a header placed from a column; ok is false for a
// header the record leaves out. A NULL column (outbox.Header.Null) is a header
// with a null value with Debezium's headers (SimpleHeaderConverter writes null for
// null) and no header with walrelay's. With walrelay's own
// headers it is the column's text as PostgreSQL writes it, sharing h's memory.
// With Debezium's (IDHeaderOnly) it is what Debezium's PostgreSQL connector makes
// of the column with its default time.precision.mode (adaptive), written by Kafka
// Connect's SimpleHeaderConverter (Values.convertToString):
//   - boolean: true or false;
//   - timestamp with time zone: ISO 8601 in UTC (io.debezium.time.ZonedTimestamp),
//     with as many fraction digits as the column's precision (6 when it has none);
//     precision 0 writes the fraction only when it is not zero;
//   - timestamp without time zone: milliseconds since the epoch at precision 0 to 3
//     (io.debezium.time.Timestamp), microseconds otherwise (MicroTimestamp);
//   - date: days since the epoch (io.debezium.time.Date);
//   - numeric with a scale (numeric(p,s)): Java's BigDecimal.toString, which is
//     PostgreSQL's text but for values under 10^-6, written like 1.00E-8
//     (decimal.handling.mode precise, the default, or string for the text);
//   - text, numbers, uuid, json and the rest: their text, as the connector's
//     strings and Values.convertToString write them.
//
// A value that does not parse (infinity, a year BC) is written as its text.
func (f *Format) HeaderValue(h outbox.Header) (v []byte, ok bool) {
	switch {
	case h.Null:
		return nil, f.IDHeaderOnly
	case !f.IDHeaderOnly:
		return bytesOf(h.Value), true
	}
	return f.debeziumHeaderValue(h), true
}

func (f *Format) debeziumHeaderValue(h outbox.Header) []byte {
	switch h.Type {
	case "boolean":
		switch h.Value {
		case "t":
			return []byte("true")
		case "f":
			return []byte("false")
		}
	case "numeric":
	case "date":
		if t, err := time.Parse(time.DateOnly, h.Value); err == nil {
			return strconv.AppendInt(nil, t.Unix()/86400, 10) // midnight UTC: a whole day
		}
	default:
		if strings.HasPrefix(h.Type, "numeric(") {
			return appendBigDecimal(nil, h.Value)
		}
		precision, zone, ok := timestampType(h.Type)
		if !ok {
			break
		}
		t, ok := parsePGTimestamp(h.Value, zone)
		if !ok {
			break
		}
		if !zone {
			if precision <= 3 {
				return strconv.AppendInt(nil, t.UnixMilli(), 10)
			}
			return strconv.AppendInt(nil, t.UnixMicro(), 10)
		}
		return appendZoned(nil, t.UTC(), precision)
	}
	return bytesOf(h.Value)
}

// timestampType reads format_type's "timestamp[(p)] with[out] time zone"; a
// column without a precision has 6.
func timestampType(s string) (precision int, zone, ok bool) {
	rest, found := strings.CutPrefix(s, "timestamp")
	if !found {
		return 0, false, false
	}
	precision = 6
	if strings.HasPrefix(rest, "(") {
		end := strings.IndexByte(rest, ')')
		if end < 0 {
			return 0, false, false
		}
		p, err := strconv.Atoi(rest[1:end])
		if err != nil {
			return 0, false, false
		}
		precision, rest = p, rest[end+1:]
	}
	switch rest {
	case " with time zone":
		return precision, true, true
	case " without time zone":
		return precision, false, true
	}
	return 0, false, false
}

// parsePGTimestamp reads PostgreSQL's ISO text of a timestamp (DateStyle ISO, as
// the replication connection and pgx's text reads have it); one without a zone is
// taken as UTC.
func parsePGTimestamp(s string, zone bool) (time.Time, bool) {
	layouts := []string{"2006-01-02 15:04:05.999999999"}
	if zone {
		layouts = []string{"2006-01-02 15:04:05.999999999-07", "2006-01-02 15:04:05.999999999-07:00",
			"2006-01-02 15:04:05.999999999-07:00:00"}
	}
	for _, l := range layouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// appendZoned writes t (UTC) as ZonedTimestamp.toIsoString does: exactly
// precision fraction digits for 1 to 9, and for 0 Java's ISO_OFFSET_DATE_TIME,
// which writes the fraction's digits without trailing zeros, none for zero.
func appendZoned(b []byte, t time.Time, precision int) []byte {
	b = t.AppendFormat(b, "2006-01-02T15:04:05")
	if precision > 0 && precision <= 9 {
		b = append(b, '.')
		frac := strconv.Itoa(t.Nanosecond() + 1e9)[1:] // nine digits
		b = append(b, frac[:precision]...)
	} else if ns := t.Nanosecond(); ns != 0 {
		b = append(b, '.')
		b = append(b, strings.TrimRight(strconv.Itoa(ns + 1e9)[1:], "0")...)
	}
	return append(b, 'Z')
}

// appendBigDecimal writes PostgreSQL's text of a numeric as Java's
// BigDecimal.toString does: the same digits, but in scientific notation when the
// exponent of the first significant digit is below -6 (1.00E-8 for 0.0000000100).
// NaN and infinities are written as they are.
func appendBigDecimal(b []byte, s string) []byte {
	sign, digits := "", s
	if strings.HasPrefix(digits, "-") {
		sign, digits = "-", digits[1:]
	}
	whole, frac, _ := strings.Cut(digits, ".")
	if whole == "" || strings.Trim(whole+frac, "0123456789") != "" {
		return append(b, s...)
	}
	unscaled := strings.TrimLeft(whole+frac, "0")
	if unscaled == "" {
		unscaled = "0"
	}
	adjusted := len(unscaled) - 1 - len(frac)
	if adjusted >= -6 {
		return append(b, s...)
	}
	b = append(b, sign...)
	b = append(b, unscaled[0])
	if len(unscaled) > 1 {
		b = append(b, '.')
		b = append(b, unscaled[1:]...)
	}
	b = append(b, 'E')
	return strconv.AppendInt(b, int64(adjusted), 10)
}
