package simulator

import (
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// TestDrainedNodesAreRefused: a replacement goes to no node the plan
// drains or the simulation holds, among all nodes and among the few a
// pod's PreFilter leaves (node affinity by metadata.name), with node
// classes on and off; with every allowed node drained it fits nowhere,
// for the drain taint.
func TestDrainedNodesAreRefused(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	prof := profile(t, "binpacking-scheduler.yaml")
	for _, every := range []bool{false, true} {
		snap := &snapshot.Snapshot{}
		for _, n := range []string{"a", "b", "c", "d", "src"} {
			snap.Nodes = append(snap.Nodes, testutil.BuildTestNode(n, "8", "32Gi"))
		}
		plain := plainPod("plain", prof.SchedulerName, "1", "1Gi")
		plain.Spec.NodeName = "src"
		named := plainPod("named", prof.SchedulerName, "1", "1Gi")
		named.Spec.NodeName = "src"
		named.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{ // a metadata.name requirement takes one name
				{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"b"}}}},
				{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"d"}}}},
			}}}}
		snap.Pods = []*v1.Pod{plain, named}
		var opts []Option
		if every {
			opts = append(opts, WithEveryNode())
		}
		s, err := New(ctx, []*config.KubeSchedulerProfile{prof}, snap, opts...)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			pod           *v1.Pod
			drained, held []string
			allowed       []string // "" alone: no node
		}{
			{plain, []string{"a", "b"}, nil, []string{"c", "d"}},
			{plain, []string{"a", "b", "c"}, []string{"d"}, []string{""}},
			{named, []string{"b"}, nil, []string{"d"}},
			{named, []string{"d"}, []string{"b"}, []string{""}},
			{named, nil, []string{"a", "c"}, []string{"b", "d"}},
		} {
			s.Hold(sets.New(tc.held...))
			pred, err := s.Predict(ctx, tc.pod, PredictOptions{LeaveSource: true, Drained: sets.New(tc.drained...)})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(tc.allowed, pred.Node) {
				t.Errorf("every node %v, %s with %v drained and %v held: placed on %q, want one of %q (%s)", every, tc.pod.Name, tc.drained, tc.held, pred.Node, tc.allowed, pred.Unschedulable)
			}
			if pred.Node == "" && tc.pod == named && !strings.Contains(pred.Unschedulable, "2 node(s) had untolerated taint") {
				t.Errorf("every node %v, %s with %v drained and %v held: fits nowhere for %q, want the drain taint named", every, tc.pod.Name, tc.drained, tc.held, pred.Unschedulable)
			}
		}
	}
}

// TestPlaceOfFollowsItsList: node places follow the list they are asked
// of, also when it changes under the same first node and length.
func TestPlaceOfFollowsItsList(t *testing.T) {
	info := func(name string) fwk.NodeInfo {
		ni := framework.NewNodeInfo()
		ni.SetNode(testutil.BuildTestNode(name, "1", "1Gi"))
		return ni
	}
	a, b, c := info("a"), info("b"), info("c")
	var s Simulator
	for _, tc := range []struct {
		all  []fwk.NodeInfo
		name string
		want int
	}{
		{[]fwk.NodeInfo{a, b, c}, "b", 1},
		{[]fwk.NodeInfo{a, b, c}, "c", 2},
		{[]fwk.NodeInfo{a, c, b}, "c", 1}, // same first node and length
		{[]fwk.NodeInfo{a, c, b}, "b", 2},
		{[]fwk.NodeInfo{b, a}, "a", 1},
	} {
		if i, ok := s.placeOf(tc.all, tc.name); !ok || i != tc.want {
			t.Errorf("place of %s: %d, %v; want %d", tc.name, i, ok, tc.want)
		}
	}
}
