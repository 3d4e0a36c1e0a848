//go:build e2e

package e2e

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/gang"
	"github.com/rebalancer-dev/rebalancer/pkg/optout"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// TestGangMovesWholeOrNotAtAll: on a node that gains a NoSchedule taint,
// two gangs' members no longer tolerate it. Each gang also has a member on
// another node. One `run --once`: the gang whose members may all move is
// evicted whole, its member on the untainted node too, every replacement
// lands on its planned target and none on the tainted node; the gang with
// an opted-out member is not touched at all, and the plan says why.
func TestGangMovesWholeOrNotAtAll(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	nodes := e.nodeNames("gang", 4)
	e.addNodes("8", nodes...)
	group := func(name string) map[string]string { return map[string]string{gang.GroupNameAnnotation: name} }
	e.fragmentedReplicaSetWith(schedulerName, "train", resources("1", "1Gi"), group("train"), []string{nodes[0], nodes[0], nodes[1]})
	e.fragmentedReplicaSetWith(schedulerName, "eval", resources("1", "1Gi"), group("eval"), []string{nodes[0], nodes[1]})
	train := e.boundPods("train", 3)
	evalPods := e.boundPods("eval", 2)
	stays := evalPods[0]
	if stays.Spec.NodeName == nodes[0] {
		stays = evalPods[1]
	}
	e.annotate(stays.Name, map[string]string{optout.KarpenterDoNotDisrupt: "true"})
	before := map[string]bool{}
	for _, p := range append(train, evalPods...) {
		before[string(p.UID)] = true
	}
	e.taintForMaintenance(nodes[0])

	res := runOnce(t)
	evicted := e.evicted(res)
	var moves []plan.Move
	for _, m := range res.Plan.Moves {
		if m.Namespace == e.ns {
			moves = append(moves, m)
			if m.Gang != "train" || !strings.HasPrefix(m.Name, "train-") {
				t.Errorf("move %s of gang %q: want only train's members, each naming its gang", m.Pod, m.Gang)
			}
		}
	}
	for _, p := range train {
		if !evicted[p.Name] {
			t.Errorf("%s (on %s) not evicted: the train gang must move whole; evicted %v", p.Name, p.Spec.NodeName, evicted)
		}
	}
	for _, p := range evalPods {
		if evicted[p.Name] {
			t.Errorf("%s evicted: the eval gang has an opted-out member and must stay whole", p.Name)
		}
	}
	gangSkip := false
	for _, s := range res.Plan.Skipped {
		gangSkip = gangSkip || strings.HasPrefix(s.Pod, e.ns+"/eval-") && s.Reason == plan.ReasonGang && strings.Contains(s.Detail, stays.Name)
	}
	if !gangSkip {
		t.Errorf("no %s skip naming %s: %+v", plan.ReasonGang, stays.Name, res.Plan.Skipped)
	}

	after := e.boundPods("train", 3)
	// (A member's target may be another's source: the gang leaves whole.)
	onTarget, _ := landed(moves, before, after)
	_, where := perNode(after)
	if onTarget != len(moves) {
		t.Errorf("train after the run: %s; %d of %d replacements on their targets", where, onTarget, len(moves))
	}
	for _, p := range after {
		if p.Spec.NodeName == nodes[0] {
			t.Errorf("%s runs on the tainted node %s", p.Name, nodes[0])
		}
	}
}

// TestConsolidationMovesAGangWhole: the two thinnest of four nodes each run
// a member of one gang and a pod of another workload; the two others hold
// more. One `run --once` drains both thin nodes: the gang is evicted whole,
// each member's move names it, every replacement lands on its planned
// target, and nothing of the test's runs on the drained nodes after.
func TestConsolidationMovesAGangWhole(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	nodes := e.nodeNames("gangdrain", 4)
	e.addNodes("8", nodes...)
	e.fragmentedReplicaSetWith(schedulerName, "train", resources("500m", "512Mi"), map[string]string{gang.GroupNameAnnotation: "train"}, nodes[:2])
	e.fragmentedReplicaSet("web", resources("1", "1Gi"), nodes[:2])
	e.fragmentedReplicaSet("big", resources("3", "1Gi"), nodes[2:])
	train := e.boundPods("train", 2)
	before := map[string]bool{}
	for _, app := range []string{"train", "web", "big"} {
		for _, p := range e.boundPods(app, 2) {
			before[string(p.UID)] = true
		}
	}

	res := runOnce(t)
	evicted := e.evicted(res)
	var moves []plan.Move
	for _, m := range res.Plan.Moves {
		if m.Namespace != e.ns {
			continue
		}
		moves = append(moves, m)
		if strings.HasPrefix(m.Name, "train-") != (m.Gang == "train") {
			t.Errorf("move %s names gang %q: want train on train's members alone", m.Pod, m.Gang)
		}
	}
	for _, p := range train {
		if !evicted[p.Name] {
			t.Fatalf("%s (on %s) not evicted: want the gang moved whole to drain its nodes; moves %+v, skipped %+v", p.Name, p.Spec.NodeName, moves, res.Plan.Skipped)
		}
	}
	var after []v1.Pod
	for _, app := range []string{"train", "web", "big"} {
		after = append(after, e.boundPods(app, 2)...)
	}
	onTarget, _ := landed(moves, before, after)
	_, where := perNode(after)
	if onTarget != len(moves) {
		t.Errorf("after the run: %s; %d of %d replacements on their targets", where, onTarget, len(moves))
	}
	for _, p := range after {
		if p.Spec.NodeName == nodes[0] || p.Spec.NodeName == nodes[1] {
			t.Errorf("after the run: %s; %s still runs on %s, which the plan drains", where, p.Name, p.Spec.NodeName)
		}
	}
}
