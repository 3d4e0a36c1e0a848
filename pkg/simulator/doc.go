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
