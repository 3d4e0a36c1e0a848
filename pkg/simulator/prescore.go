package simulator

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// preScoredByRequests are the PreScore plugins that write, and return,
// what they compute from the pod's requests alone: NodeResourcesFit and
// balanced allocation, when no resource they score is backed by DRA
// devices (then DRA's allocations are part of it). Computing those
// requests is a third of what a cycle allocates, for a handful of pod
// shapes: the runner keeps what the plugin wrote by the pod's resources
// key, the key their scores are remembered by (memoKeys), and writes it
// again for the next pod of the same key.
var preScoredByRequests = sets.New(names.NodeResourcesFit, names.NodeResourcesBalancedAllocation)

// preScorer is one PreScore plugin of a profile.
type preScorer struct {
	plugin fwk.PreScorePlugin
	name   string
	// key is what of a pod the plugin reads, when it is one of
	// preScoredByRequests (nil otherwise), and done what it answered and
	// wrote (at stateKey) by that key.
	key      podKey
	stateKey fwk.StateKey
	done     map[string]preScored
}

type preScored struct {
	status *fwk.Status
	data   fwk.StateData // nil: the plugin wrote nothing
}

// maxPreScored bounds the answers a plugin keeps: as many pod shapes as a
// large cluster runs; beyond, they are forgotten and kept anew.
const maxPreScored = 4096

func newPreScorer(pl fwk.PreScorePlugin, scoreKeys map[string]podKey) preScorer {
	p := preScorer{plugin: pl, name: pl.Name()}
	if preScoredByRequests.Has(p.name) && scoreKeys[p.name] != nil {
		// The framework's plugins write their state at "PreScore" and their name.
		p.key, p.stateKey, p.done = scoreKeys[p.name], fwk.StateKey("PreScore"+p.name), map[string]preScored{}
	}
	return p
}

// run is the plugin's PreScore, or what it answered and wrote for a pod
// of the same key.
func (p *preScorer) run(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	if p.key == nil {
		return p.plugin.PreScore(ctx, state, pod, nodes)
	}
	key, ok := p.key(pod)
	if !ok {
		return p.plugin.PreScore(ctx, state, pod, nodes)
	}
	if done, ok := p.done[key]; ok {
		if done.data != nil {
			state.Write(p.stateKey, done.data)
		}
		return done.status
	}
	st := p.plugin.PreScore(ctx, state, pod, nodes)
	if !st.IsSuccess() && !st.IsSkip() {
		return st
	}
	if len(p.done) == maxPreScored {
		clear(p.done)
	}
	data, _ := state.Read(p.stateKey)
	p.done[key] = preScored{status: st, data: data}
	return st
}

// preScore is RunPreScorePlugins: every PreScore plugin in the profile's
// order, those that skip themselves recorded for Score.
func (r *runner) preScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	skip := sets.New[string]()
	defer state.SetSkipScorePlugins(skip)
	for i := range r.preScores {
		p := &r.preScores[i]
		st := p.run(ctx, state, pod, nodes)
		if st.IsSkip() {
			skip.Insert(p.name)
			continue
		}
		if !st.IsSuccess() {
			return fwk.AsStatus(fmt.Errorf("running PreScore plugin %q: %w", p.name, st.AsError()))
		}
	}
	return nil
}
