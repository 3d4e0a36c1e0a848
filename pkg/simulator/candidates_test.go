package simulator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"
)

// TestWinnersAreEveryNodeASampleCanChoose: winners finds exactly the
// scores that are highest (ties included) in some window of w consecutive
// scores of the ring, checked against trying every window, on random score
// lists full of ties.
func TestWinnersAreEveryNodeASampleCanChoose(t *testing.T) {
	random := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		n := 1 + random.IntN(30)
		w := 1 + random.IntN(n+3) // windows larger than the ring too
		scores := make([]fwk.NodePluginScores, n)
		for i := range scores {
			scores[i] = fwk.NodePluginScores{Name: fmt.Sprintf("node-%02d", i), TotalScore: int64(random.IntN(1 + random.IntN(6)))}
		}
		want := map[int]bool{}
		width := min(w, n)
		for start := range n {
			best := scores[start].TotalScore
			for k := range width {
				best = max(best, scores[(start+k)%n].TotalScore)
			}
			for k := range width {
				if scores[(start+k)%n].TotalScore == best {
					want[(start+k)%n] = true
				}
			}
		}
		got := winners(scores, w)
		if !slices.IsSorted(got) {
			t.Fatalf("trial %d: winners %v not in order", trial, got)
		}
		var wantList []int
		for i := range n {
			if want[i] {
				wantList = append(wantList, i)
			}
		}
		if !slices.Equal(got, wantList) {
			totals := make([]int64, n)
			for i, s := range scores {
				totals[i] = s.TotalScore
			}
			t.Fatalf("trial %d: scores %v, window %d: winners %v, want %v", trial, totals, w, got, wantList)
		}
	}
}
