// Package suggest finds the name a user most likely meant: a misspelt flag
// or plugin answered with "did you mean ...?", as cobra answers a misspelt
// command.
package suggest

import "strings"

// Closest is the candidate nearest to word, ignoring case, if it is near
// enough to be a misspelling (an edit distance of at most a third of the
// word, 2 for short words); "" otherwise.
func Closest(word string, candidates []string) string {
	limit := max(2, len(word)/3)
	best, bestDist := "", limit+1
	w := strings.ToLower(word)
	for _, c := range candidates {
		if d := distance(w, strings.ToLower(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b, in bytes.
func distance(a, b string) int {
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
