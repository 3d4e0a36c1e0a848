// Package simulator is the one in-memory cluster every what-if runs on: a
// snapshot's nodes and pods in kube-scheduler's own cache, with a
// kube-scheduler profile (the same in-tree plugins, arguments and weights
// that the cluster's scheduler runs) to place pods on it. It answers "if
// this pod were recreated now, which node would it get?", applies moves,
// evictions and placements incrementally so later questions see them, and
// forks: a fork's changes are kept (Commit) or undone (Revert) at the cost
// of what they changed. The planner, Consolidation, the multi-round
// simulation and the upstream baseline all work on it; nothing else builds
// a scheduler cache or seeds a fake API from a snapshot.
package simulator

// Where things are, in the order a what-if uses them:
//
//   - options.go, new.go: the options and New, which builds a framework
//     per profile and loads the snapshot into the cache;
//   - simulator.go: the Simulator, and its node queries;
//   - schedulers.go: the modelled schedulers, and which one places a pod;
//   - cycle.go, filter.go: one simulated scheduling cycle (schedule), its
//     filter pass and its scoring; classes.go, runner.go and memo.go make
//     cycles cheaper with the same answers;
//   - predict.go: Predict and Resolvable, cycles that change nothing;
//   - moves.go: Move, Evict and Place, which change the state;
//   - state.go: the pods, and the journal behind Fork, Commit and Revert;
//   - replay.go: kube-scheduler's random choices, for what it would do;
//   - dra.go: ResourceClaims as the simulation changes them;
//   - load.go, measure.go, bound.go: usage, and the measures of the cluster
//     (in use, utilization, lower bounds);
//   - fakeapi.go: the fake API served from a snapshot.
