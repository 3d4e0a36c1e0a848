package main

import (
	"reflect"
	"testing"
	"time"
)

func testSettings() settings {
	return settings{Seed: 7, Duration: 30 * time.Minute, Phase: 5 * time.Minute, Nodes: 50, NodeCPUMilli: 8000, Fill: 0.45, DefaultShare: 0.2, Tick: 5 * time.Second}
}

func TestScheduleIsTheSeeds(t *testing.T) {
	s := testSettings()
	a, b := newSchedule(s, workloads(s)), newSchedule(s, workloads(s))
	if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(workloads(s), workloads(s)) {
		t.Fatal("one seed gave two schedules")
	}
	s.Seed++
	if reflect.DeepEqual(a.Actions, newSchedule(s, workloads(s)).Actions) {
		t.Error("another seed gave the same actions")
	}
}

func TestSchedulePhases(t *testing.T) {
	for _, d := range []time.Duration{10 * time.Minute, 25 * time.Minute, 30 * time.Minute, 33 * time.Minute} {
		s := testSettings()
		s.Duration = d
		sched := newSchedule(s, workloads(s))
		ps := sched.Phases
		if ps[0].Kind != phaseBurst || ps[len(ps)-1].Kind != phaseQuiet || ps[len(ps)-1].End != d {
			t.Errorf("%s: phases%s: want a burst first and a quiet phase ending the run", d, phaseNames(ps))
		}
		for i := 1; i < len(ps); i++ {
			if ps[i].Start != ps[i-1].End {
				t.Errorf("%s: a gap or overlap before phase %d", d, i)
			}
			if ps[i].Kind != phaseQuiet && ps[i-1].Kind != phaseQuiet {
				t.Errorf("%s: two churn phases in a row:%s", d, phaseNames(ps))
			}
		}
		for _, a := range sched.Actions {
			p := sched.phaseAt(a.At)
			if p.Kind != a.Kind {
				t.Errorf("%s: a %s action at %s, in a %s phase", d, a.Kind, a.At, p.Kind)
			}
		}
	}
}

func TestWorkloadsFillTheirShare(t *testing.T) {
	s := testSettings()
	var cpu int64
	defaults := 0
	ws := workloads(s)
	for _, w := range ws {
		cpu += w.CPUMilli * int64(w.Replicas)
		if w.DefaultScheduler {
			defaults++
		}
	}
	want := int64(float64(s.NodeCPUMilli*int64(s.Nodes)) * s.Fill)
	if cpu < want || cpu > want+4000*10 {
		t.Errorf("the workloads ask %d mCPU, want %d to one workload more", cpu, want)
	}
	if defaults == 0 || defaults == len(ws) {
		t.Errorf("%d of %d workloads are default-scheduler's, want a share", defaults, len(ws))
	}
}

func TestScaleStaysAroundTheBase(t *testing.T) {
	s := testSettings()
	base := workloads(s)
	for _, a := range newSchedule(s, base).Actions {
		if a.Kind != phaseScale {
			continue
		}
		r := base[a.Workload].Replicas
		if a.Replicas < 1 || a.Replicas > r/2+r {
			t.Errorf("%s scaled to %d, base %d", base[a.Workload].Name, a.Replicas, r)
		}
	}
}
