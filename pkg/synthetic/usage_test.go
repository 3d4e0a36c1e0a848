package synthetic

import (
	"bytes"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// TestUsage: every running pod and every node gets usage, a node's is its
// pods' plus its own, the same seed gives the same usage, and the file
// decodes.
func TestUsage(t *testing.T) {
	gen := func() *bytes.Buffer {
		snap, err := Generate(Options{Nodes: 10, Pods: 300, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		Usage(snap, 7, SampledAt)
		running := 0
		for _, p := range snap.Pods {
			if p.Spec.NodeName != "" && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
				running++
			}
		}
		if len(snap.NodeMetrics) != 10 || len(snap.PodMetrics) != running {
			t.Fatalf("%d NodeMetrics and %d PodMetrics, want 10 and %d", len(snap.NodeMetrics), len(snap.PodMetrics), running)
		}
		onNode := map[string]string{}
		for _, p := range snap.Pods {
			onNode[p.Namespace+"/"+p.Name] = p.Spec.NodeName
		}
		sums := map[string]int64{}
		for _, m := range snap.PodMetrics {
			for _, c := range m.Containers {
				sums[onNode[m.Namespace+"/"+m.Name]] += c.Usage.Cpu().MilliValue()
			}
		}
		for _, m := range snap.NodeMetrics {
			if got := m.Usage.Cpu().MilliValue(); got != sums[m.Name]+100 {
				t.Errorf("node %s uses %dm, want its pods' %dm and its own 100m", m.Name, got, sums[m.Name])
			}
		}
		var b bytes.Buffer
		if err := snap.Encode(&b); err != nil {
			t.Fatal(err)
		}
		if _, err := snapshot.Decode("synthetic.yaml", b.Bytes()); err != nil {
			t.Fatalf("the generated usage does not decode: %v", err)
		}
		return &b
	}
	a, b := gen(), gen()
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("the same seed gave different usage")
	}
}
