package record

// inherit takes prev's Avro schema text when both payloads expanded to the same
// schema: a backlog's events mostly share one shape, and writing the text again
// for each was a fifth of the expanded Avro value's cost (docs/performance.md,
// "Schema registry converters"). The text depends on the schema alone (and the
// Format's payload column, the same for both).
func (x *expansion) inherit(prev *expansion) {
	if prev == nil || !prev.ok || !x.ok {
		return
	}
	if t := prev.avro.Load(); t != nil && sameSchema(prev.s, x.s) {
		x.avro.Store(t)
	}
}

// sameSchema says whether a and b are the same inferred schema: kinds, field
// names and order, element schemas.
func sameSchema(a, b *schema) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil || a.kind != b.kind || len(a.fields) != len(b.fields) {
		return false
	}
	for i := range a.fields {
		if a.fields[i].name != b.fields[i].name || !sameSchema(a.fields[i].s, b.fields[i].s) {
			return false
		}
	}
	return sameSchema(a.elem, b.elem)
}
