package planner

import (
	"testing"

	"github.com/rebalancer-dev/rebalancer/pkg/gang"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// TestGangMembersStay: a gang's member is never moved alone, by a drain or
// by a plugin that finds it misplaced, and the node it runs on is not
// emptied; the same cluster without the gang is drained.
func TestGangMembersStay(t *testing.T) {
	for _, member := range []bool{false, true} {
		c := thinCluster(3)
		c.node("tainted", "8", "32Gi", noSchedule)
		c.pod("team-a", "big", "ReplicaSet", "node-01", "500m", "1Gi") // node-01 is the fullest: the others empty onto it
		worker := c.pod("default", "train", "Job", "node-02", "500m", "512Mi")
		misplaced := c.pod("default", "train", "Job", "tainted", "500m", "512Mi")
		if member {
			worker.Labels[gang.PodGroupLabel] = "train"
			misplaced.Annotations = map[string]string{gang.GroupNameAnnotation: "train"}
		}
		p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
		var offWorker, offTainted bool
		for _, m := range p.Moves {
			offWorker = offWorker || m.Source == "node-02"
			offTainted = offTainted || m.UID == string(misplaced.UID)
		}
		if !member {
			if !offWorker || !offTainted {
				t.Fatalf("without a gang: node-02 drained %v, the pod on the tainted node moved %v; want both (the test shows nothing)", offWorker, offTainted)
			}
			continue
		}
		if offWorker || offTainted {
			t.Errorf("a gang's member moved, or the node it runs on drained: %+v", p.Moves)
		}
		for _, pod := range []string{worker.Name, misplaced.Name} {
			found := false
			for _, s := range p.Skipped {
				found = found || s.Pod == "default/"+pod && s.Reason == plan.ReasonGang
			}
			if !found {
				t.Errorf("%s is not skipped as %s: %+v", pod, plan.ReasonGang, p.Skipped)
			}
		}
	}
}
