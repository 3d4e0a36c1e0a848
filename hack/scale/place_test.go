package main

import "testing"

func TestPlaceFor(t *testing.T) {
	deps := workloads(1500, 50, 0.5)
	where, err := placeFor(deps, 100)
	if err != nil {
		t.Fatal(err)
	}
	cpu := make([]int, 100)
	pods := make([]int, 100)
	spreadNodes, packedNodes := map[int]bool{}, map[int]bool{}
	for i, d := range deps {
		if len(where[i]) != d.Replicas {
			t.Fatalf("%s: %d pods placed, want %d", d.Name, len(where[i]), d.Replicas)
		}
		for _, n := range where[i] {
			cpu[n] += d.MilliCPU
			pods[n]++
			if d.Scheduler == "default-scheduler" {
				spreadNodes[n] = true
			} else {
				packedNodes[n] = true
			}
		}
	}
	for n := range cpu {
		if cpu[n] > nodeCPUMilli || pods[n] > 110 {
			t.Errorf("node %d: %dm CPU, %d pods", n, cpu[n], pods[n])
		}
	}
	// default-scheduler's pods on every node; rebalancer-scheduler's on
	// as few as packCeiling allows: 750 pods of 234m on average take
	// about 175,000m: some 32 nodes filled to 90% beside the spread pods (22%).
	if len(spreadNodes) != 100 {
		t.Errorf("default-scheduler's pods on %d nodes, want all 100", len(spreadNodes))
	}
	if len(packedNodes) > 40 {
		t.Errorf("rebalancer-scheduler's pods on %d nodes, want them packed", len(packedNodes))
	}
	if _, err := placeFor(workloads(20000, 100, 0.5), 100); err == nil {
		t.Error("20,000 pods on 100 nodes: no error")
	}
}
