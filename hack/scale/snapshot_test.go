package main

import (
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// TestWriteSnapshot: the file loads and admits as a snapshot, with every
// pod of the run bound and owned by its Deployment's ReplicaSet.
func TestWriteSnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scale.json")
	if err := writeSnapshot(path, 20, workloads(250, 100, 0.5)); err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Admit(); err != nil {
		t.Fatal(err)
	}
	if len(s.Nodes) != 20 || len(s.Pods) != 250 {
		t.Fatalf("%d nodes and %d pods, want 20 and 250", len(s.Nodes), len(s.Pods))
	}
	owners := map[string]int{}
	for _, p := range s.Pods {
		ref := metav1.GetControllerOf(p)
		if p.Spec.NodeName == "" || ref == nil || ref.Kind != "ReplicaSet" {
			t.Fatalf("pod %s/%s: node %q, controller %v", p.Namespace, p.Name, p.Spec.NodeName, ref)
		}
		owners[p.Namespace+"/"+ref.Name]++
	}
	if len(owners) != 3 {
		t.Errorf("%d ReplicaSets, want 3: %v", len(owners), owners)
	}
}
