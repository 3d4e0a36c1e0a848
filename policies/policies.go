// Package policies embeds the shipped scheduler profiles and descheduler
// policies, so tools and tests use exactly the files users deploy.
package policies

import "embed"

// Files holds every shipped policy file, by name.
//
//go:embed *.yaml
var Files embed.FS

// Shipped pairs: each DeschedulerPolicy and the KubeSchedulerConfiguration it
// must run with. The crossed pairs oscillate (see README.md in this folder).
var Pairs = []Pair{
	{Name: "binpacking", Policy: "binpacking-policy.yaml", Scheduler: "binpacking-scheduler.yaml"},
	{Name: "balancing", Policy: "balancing-policy.yaml", Scheduler: "balancing-scheduler.yaml"},
	{Name: "load-aware", Policy: "load-aware-policy.yaml", Scheduler: "load-aware-scheduler.yaml"},
}

// Pair names a policy file and the scheduler profile file that belongs with it.
type Pair struct {
	Name      string
	Policy    string
	Scheduler string
}
