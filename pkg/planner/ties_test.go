package planner

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

// TestTiesEndWithTheLimits: once the per-namespace limit is spent, tied
// sources whose pods it keeps from moving take no turn, so
// HighNodeUtilization runs once, not once for each of the 30 tied nodes
// (each run a walk over the whole cluster: at 10,000 nodes a plan of
// hours). The plan still holds the one move of theirs the limit allows.
func TestTiesEndWithTheLimits(t *testing.T) {
	pol, prof := loadPair(t, "binpacking")
	pol.MaxNoOfPodsToEvictPerNamespace = ptrTo(uint(1))
	c := newCluster()
	for i := range 2 {
		n := c.node(fmt.Sprintf("full-%d", i), "8", "32Gi")
		c.pod("team-b", "db", "StatefulSet", n.Name, "5", "20Gi")
	}
	for i := range 30 {
		n := c.node(fmt.Sprintf("low-%02d", i), "8", "32Gi")
		c.pod("team-a", "web", "ReplicaSet", n.Name, "500m", "1Gi")
	}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(3)))
	ctx := klog.NewContext(context.Background(), logger)
	p, err := planOn(ctx, pol, prof, c.snap, Options{ID: "ties"})
	if err != nil {
		t.Fatal(err)
	}
	web := 0
	for _, m := range p.Moves {
		if m.Namespace == "team-a" {
			web++
		}
	}
	if web != 1 {
		t.Fatalf("%d moves in team-a, want the 1 the namespace limit allows", web)
	}
	log := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
	m := regexp.MustCompile(`Ran the plugin once per rank of its tied sources plugin="HighNodeUtilization" runs=(\d+)`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no log of HighNodeUtilization's runs:\n%s", log)
	}
	if runs, _ := strconv.Atoi(m[1]); runs > 1 {
		t.Errorf("HighNodeUtilization ran %d times with the namespace limit spent, want once", runs)
	}
}
