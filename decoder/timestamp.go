package decoder

import "time"

// parseTimestamptz parses the text PostgreSQL writes for a timestamptz with
// DateStyle=ISO:
//
//	2026-11-29 19:31:48.123456+00
//	2026-11-29 19:31:48+05:30
//	1850-01-01 00:00:00-00:53:28
//	0044-03-15 12:00:00+00 BC
//
// Years have four or more digits, the fraction one to nine, the offset is
// ±HH, ±HH:MM or ±HH:MM:SS. The result is in UTC. infinity, -infinity and
// anything else fail. It does not allocate.
func parseTimestamptz(b []byte) (time.Time, bool) { return parseTimestamp(b, true) }

// parseTimestamp parses a timestamptz (withZone) or a timestamp without time zone,
// which has no offset and is taken as UTC.
func parseTimestamp(b []byte, withZone bool) (time.Time, bool) {
	p := tsParser{b: b}
	year := p.digits(4, 9)
	p.lit('-')
	month := p.digits(2, 2)
	p.lit('-')
	day := p.digits(2, 2)
	p.lit(' ')
	hour := p.digits(2, 2)
	p.lit(':')
	minute := p.digits(2, 2)
	p.lit(':')
	sec := p.digits(2, 2)
	nsec := 0
	if p.peek('.') {
		p.i++
		start := p.i
		nsec = p.digits(1, 9)
		for range 9 - (p.i - start) {
			nsec *= 10
		}
	}
	sign, offH, offM, offS := 1, 0, 0, 0
	if withZone {
		switch {
		case p.peek('+'):
		case p.peek('-'):
			sign = -1
		default:
			return time.Time{}, false
		}
		p.i++
		offH = p.digits(2, 2)
	}
	if withZone && p.peek(':') {
		p.i++
		offM = p.digits(2, 2)
		if p.peek(':') {
			p.i++
			offS = p.digits(2, 2)
		}
	}
	if p.bad || year == 0 || month < 1 || month > 12 || hour > 23 || minute > 59 || sec > 59 ||
		offH > 15 || offM > 59 || offS > 59 {
		return time.Time{}, false
	}
	switch rest := b[p.i:]; string(rest) {
	case "":
	case " BC":
		year = 1 - year // 1 BC is year 0 in Go's proleptic Gregorian calendar
	default:
		return time.Time{}, false
	}
	if day < 1 || day > daysIn(month, year) {
		return time.Time{}, false
	}
	off := sign * (offH*3600 + offM*60 + offS)
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	return t.Add(-time.Duration(off) * time.Second), true
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// tsParser reads fixed fields; after the first mismatch bad is set and every
// later read returns 0.
type tsParser struct {
	b   []byte
	i   int
	bad bool
}

func (p *tsParser) peek(c byte) bool { return !p.bad && p.i < len(p.b) && p.b[p.i] == c }

func (p *tsParser) lit(c byte) {
	if !p.peek(c) {
		p.bad = true
		return
	}
	p.i++
}

// digits reads between min and max decimal digits.
func (p *tsParser) digits(min, max int) int {
	if p.bad {
		return 0
	}
	v, n := 0, 0
	for n < max && p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		v = v*10 + int(p.b[p.i]-'0')
		p.i++
		n++
	}
	if n < min {
		p.bad = true
		return 0
	}
	return v
}
