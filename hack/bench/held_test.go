package main

import (
	"testing"

	"k8s.io/klog/v2/ktesting"
)

// TestHeldFleet: the held fleet is what its benchmark says, a cluster the
// shipped pair may not change: no move, and every pod refused by its PDB.
func TestHeldFleet(t *testing.T) {
	t.Chdir("../..") // the policy's paths are the repository's
	_, ctx := ktesting.NewTestContext(t)
	snap := heldFleet(200)
	p, err := planAsUsers(ctx, policyFile, snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Moves) != 0 {
		t.Fatalf("%d moves, want none", len(p.Moves))
	}
	// Each of the tied nodes' pods is asked about by HighNodeUtilization.
	refused := map[string]bool{}
	for _, s := range p.Skipped {
		if s.Reason != "pdb" {
			t.Fatalf("%s skipped as %s (%s), want pdb", s.Pod, s.Reason, s.Detail)
		}
		if s.Strategy == "HighNodeUtilization" {
			refused[s.Pod] = true
		}
	}
	perNode := map[string]int{}
	for _, pod := range snap.Pods {
		perNode[pod.Spec.NodeName]++
	}
	for _, pod := range snap.Pods {
		if perNode[pod.Spec.NodeName] == 2 && !refused[pod.Namespace+"/"+pod.Name] {
			t.Errorf("%s, on a tied node, was not refused to HighNodeUtilization", pod.Name)
		}
	}
}
