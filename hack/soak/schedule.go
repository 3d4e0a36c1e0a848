package main

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Phase kinds. Churn phases alternate with quiet ones, and the run ends
// with a quiet one, so every churn is followed by a time in which
// rebalancer alone moves pods.
const (
	phaseBurst   = "burst"   // many Deployments created at once
	phaseScale   = "scale"   // Deployments scaled up and down
	phaseRollout = "rollout" // rolling updates (the pod template patched)
	phaseCrash   = "crash"   // pods deleted at random, as crashes and node losses do
	phaseQuiet   = "quiet"   // nothing: rebalancer consolidates
)

// churnKinds rotate, from a seeded start, the first churn always a burst
// (the cluster starts empty of the run's workloads).
var churnKinds = []string{phaseScale, phaseRollout, phaseCrash, phaseBurst}

// Phase is a stretch of the run with one kind of churn.
type Phase struct {
	Kind       string
	Start, End time.Duration
}

// Action is one change to the workloads, at a time since the start.
type Action struct {
	At   time.Duration
	Kind string // a phase kind but quiet
	// Workload is the Deployment's index among base ones (scale, rollout),
	// or the burst's number (burst).
	Workload int
	// Replicas is the new scale (scale), or the burst's Deployments.
	Replicas int
	// Pick chooses among the pods present when the action runs (crash):
	// the pod at Pick mod len(pods), pods sorted by name.
	Pick uint64
}

// Schedule is the run's phases and actions, a function of its settings.
type Schedule struct {
	Phases  []Phase
	Actions []Action
}

// Workload is a Deployment of the base set: created in the first burst,
// scaled around its base replicas.
type Workload struct {
	Name             string
	Replicas         int
	CPUMilli, MemMiB int64
	// DefaultScheduler: the pods name default-scheduler (steered by the
	// extender) instead of rebalancer-scheduler.
	DefaultScheduler bool
}

// podSizes are the requests a workload's pods may have: small services to
// a few large ones.
var podSizes = []struct{ cpu, mem int64 }{
	{100, 128}, {250, 256}, {250, 512}, {500, 512}, {500, 1024}, {1000, 1024}, {1000, 2048}, {2000, 4096}, {2000, 2048}, {4000, 8192},
}

// settings are what a schedule depends on.
type settings struct {
	Seed     uint64
	Duration time.Duration
	Phase    time.Duration // each phase's length
	Nodes    int
	// NodeCPUMilli is a node's CPU; the base set asks about Fill of the
	// nodes' CPU.
	NodeCPUMilli int64
	Fill         float64
	// DefaultShare of the workloads are default-scheduler's.
	DefaultShare float64
	Tick         time.Duration // how often a churn phase acts
}

// workloads is the base set: Deployments until their pods ask Fill of the
// cluster's CPU.
func workloads(s settings) []Workload {
	rng := rand.New(rand.NewPCG(s.Seed, 1))
	want := int64(float64(s.NodeCPUMilli*int64(s.Nodes)) * s.Fill)
	var out []Workload
	for total := int64(0); total < want; {
		size := podSizes[rng.IntN(len(podSizes))]
		w := Workload{
			Name:     fmt.Sprintf("w-%03d", len(out)),
			Replicas: 1 + rng.IntN(10),
			CPUMilli: size.cpu, MemMiB: size.mem,
			DefaultScheduler: rng.Float64() < s.DefaultShare,
		}
		total += w.CPUMilli * int64(w.Replicas)
		out = append(out, w)
	}
	return out
}

// newSchedule lays out phases of s.Phase over s.Duration: churn, quiet,
// churn... ending quiet (an odd count of phases leaves the last churn
// out: two quiet phases end the run), and the actions of each churn.
func newSchedule(s settings, base []Workload) Schedule {
	rng := rand.New(rand.NewPCG(s.Seed, 2))
	n := max(int(s.Duration/s.Phase), 2)
	var sched Schedule
	next := rng.IntN(len(churnKinds))
	for i := 0; i < n; i++ {
		p := Phase{Kind: phaseQuiet, Start: time.Duration(i) * s.Phase, End: time.Duration(i+1) * s.Phase}
		switch {
		case i == 0:
			p.Kind = phaseBurst
		case i%2 == 0 && i < n-1:
			p.Kind = churnKinds[next%len(churnKinds)]
			next++
		}
		if i == n-1 {
			p.End = s.Duration
		}
		sched.Phases = append(sched.Phases, p)
	}
	bursts := 0
	for _, p := range sched.Phases {
		switch p.Kind {
		case phaseQuiet:
			continue
		case phaseBurst:
			// All at once: the first creates the base set, later ones a
			// fifth of it more (the previous burst's extra Deployments
			// deleted, so the load stays bounded).
			count := len(base)
			if bursts > 0 {
				count = max(1, len(base)/5)
			}
			sched.Actions = append(sched.Actions, Action{At: p.Start, Kind: phaseBurst, Workload: bursts, Replicas: count})
			bursts++
			continue
		}
		for at := p.Start; at < p.End; at += s.Tick {
			a := Action{At: at, Kind: p.Kind, Workload: rng.IntN(len(base)), Pick: rng.Uint64()}
			if p.Kind == phaseScale {
				// Around the base scale, so the load does not drift away.
				r := base[a.Workload].Replicas
				a.Replicas = max(1, r/2+rng.IntN(r+1))
			}
			sched.Actions = append(sched.Actions, a)
		}
	}
	return sched
}

// phaseAt is the phase running at t (the last one past the end).
func (s Schedule) phaseAt(t time.Duration) Phase {
	for _, p := range s.Phases {
		if t < p.End {
			return p
		}
	}
	return s.Phases[len(s.Phases)-1]
}
