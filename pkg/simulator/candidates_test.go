package simulator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"
)

// TestWinnersAreEveryNodeASampleCanChoose: winners finds exactly the
// scores that are highest (ties included) in some sample of n of them, on
// random score lists full of ties. Sound: the best of any random sample is
// among them. Complete: each one is the best of a sample built for it (it
// and the lowest others).
func TestWinnersAreEveryNodeASampleCanChoose(t *testing.T) {
	random := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		size := 1 + random.IntN(30)
		n := 1 + random.IntN(size+3) // samples larger than the list too
		scores := make([]fwk.NodePluginScores, size)
		totals := make([]int64, size)
		for i := range scores {
			totals[i] = int64(random.IntN(1 + random.IntN(6)))
			scores[i] = fwk.NodePluginScores{Name: fmt.Sprintf("node-%02d", i), TotalScore: totals[i]}
		}
		got := winners(scores, n)
		if !slices.IsSorted(got) || len(got) == 0 {
			t.Fatalf("trial %d: winners %v: want some, in order", trial, got)
		}
		k := min(n, size)
		for range 50 {
			sample := random.Perm(size)[:k]
			best := slices.MaxFunc(sample, func(a, b int) int { return int(totals[a] - totals[b]) })
			for _, i := range sample {
				if totals[i] == totals[best] && !slices.Contains(got, i) {
					t.Fatalf("trial %d: scores %v, samples of %d: %d is best of %v but not a winner %v", trial, totals, n, i, sample, got)
				}
			}
		}
		for _, i := range got {
			others := slices.Delete(slices.Clone(totals), i, i+1)
			slices.Sort(others)
			if k > 1 && others[k-2] > totals[i] {
				t.Fatalf("trial %d: scores %v, samples of %d: %d is a winner but no sample holding it has it best", trial, totals, n, i)
			}
		}
	}
}
