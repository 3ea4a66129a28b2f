// Package suggest finds the name a mistyped one most likely meant, for the "did you
// mean" of an unknown flag, command, setting or environment variable.
package suggest

import "math"

// Nearest returns the candidate closest to name by edit distance, when it is close
// enough to be a likely typo (at most 2 edits, or a quarter of the name), or "".
func Nearest(name string, candidates []string) string {
	best, bestDist := "", math.MaxInt
	for _, c := range candidates {
		if d := editDistance(name, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	if bestDist <= max(2, len(name)/4) {
		return best
	}
	return ""
}

// editDistance is the Levenshtein distance between a and b, in bytes (names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
