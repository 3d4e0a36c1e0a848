package main

import (
	"fmt"
	"strings"
	"time"
)

// A move is one pod rebalancer moved, as its Rebalanced event tells it.
type move struct {
	At       time.Time
	Workload string // namespace/Deployment
	From, To string
}

// pingPongs counts ping-pong: a workload moved off a node by rebalancer
// and moved back onto that node by rebalancer within window (the run's
// cooldown: over weeks, the cluster may change enough that the node is
// right again). The scheduler placing new pods of the workload there (a
// scale-up) does not count: only rebalancer's own moves undo each other.
type pingPongs struct {
	window   time.Duration
	movedOff map[string]map[string]time.Time // workload -> node -> when
	Count    int
	Examples []string // the first few, for the report
}

func newPingPongs(window time.Duration) *pingPongs {
	return &pingPongs{window: window, movedOff: map[string]map[string]time.Time{}}
}

// add records m, moves in the order they were made.
func (p *pingPongs) add(m move) {
	if when, ok := p.movedOff[m.Workload][m.To]; ok && m.At.Sub(when) <= p.window {
		p.Count++
		if len(p.Examples) < 5 {
			p.Examples = append(p.Examples, fmt.Sprintf("%s moved off %s at %s and back onto it at %s",
				m.Workload, m.To, when.UTC().Format(time.TimeOnly), m.At.UTC().Format(time.TimeOnly)))
		}
	}
	if p.movedOff[m.Workload] == nil {
		p.movedOff[m.Workload] = map[string]time.Time{}
	}
	p.movedOff[m.Workload][m.From] = m.At
}

// parseMove reads a Rebalanced event's note, "Strategy: from → to
// (reason), plan ID[: ...]", of a pod named Deployment-hash-suffix.
func parseMove(namespace, pod, note string, at time.Time) (move, bool) {
	_, rest, ok := strings.Cut(note, ": ")
	if !ok {
		return move{}, false
	}
	from, rest, ok := strings.Cut(rest, " → ")
	if !ok {
		return move{}, false
	}
	to, _, ok := strings.Cut(rest, " (")
	if !ok || from == "" || to == "" {
		return move{}, false
	}
	return move{At: at, Workload: namespace + "/" + deploymentOf(pod), From: from, To: to}, true
}

// deploymentOf is the Deployment of a pod named as its ReplicaSet names
// pods: Deployment-templatehash-suffix.
func deploymentOf(pod string) string {
	for range 2 {
		if i := strings.LastIndexByte(pod, '-'); i > 0 {
			pod = pod[:i]
		}
	}
	return pod
}
