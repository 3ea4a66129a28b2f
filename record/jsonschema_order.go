package record

import (
	"slices"
	"unicode/utf16"
)

// javaHashOrder is the order a java.util.HashMap created empty iterates keys
// put into it in the order given: by bucket, the spread String.hashCode masked by
// the table's size (16, doubled each time the map holds more than three quarters
// of it), then in insertion order within a bucket (resizes split a bucket's list
// keeping its order). Confluent's JSON Schema text lists an object's properties
// so (record/jsonschema.go). It returns indexes into keys.
//
// Not reproduced: a bucket of eight keys or more in a table under 64, where
// HashMap grows the table instead of treeifying; no outbox shape has that many
// colliding field names short of hundreds of fields.
func javaHashOrder(keys []string) []int {
	size := 16
	for len(keys) > size*3/4 {
		size *= 2
	}
	order := make([]int, len(keys))
	bucket := make([]int, len(keys))
	for i, k := range keys {
		order[i] = i
		h := javaStringHash(k)
		bucket[i] = int((h ^ h>>16) & uint32(size-1))
	}
	slices.SortStableFunc(order, func(a, b int) int { return bucket[a] - bucket[b] })
	return order
}

// javaStringHash is Java's String.hashCode: s[0]*31^(n-1) + … + s[n-1] over the
// UTF-16 code units, in 32-bit arithmetic.
func javaStringHash(s string) uint32 {
	var h uint32
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*(31*h+uint32(hi)) + uint32(lo)
			continue
		}
		h = 31*h + uint32(r)
	}
	return h
}
