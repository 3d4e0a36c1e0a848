//go:build e2e

package e2e

import (
	"testing"
)

// This file's name sorts last: go test runs a package's tests in file order,
// so TestSchedulerRBAC sees every request the scheduler made for the tests
// before it.

// notExercised are the rules of manifests/scheduler/rbac.yaml that the suite
// does not reach, and why the scheduler needs them.
var notExercised = map[string]string{
	"delete pods":                                 "preemption of lower-priority pods",
	"get persistentvolumeclaims":                  "binding WaitForFirstConsumer volumes",
	"update persistentvolumeclaims":               "binding WaitForFirstConsumer volumes",
	"get persistentvolumes":                       "binding WaitForFirstConsumer volumes",
	"update persistentvolumes":                    "binding WaitForFirstConsumer volumes",
	"get resource.k8s.io/resourceclaims/status":   "allocating devices to pods with ResourceClaims (DRA)",
	"patch resource.k8s.io/resourceclaims/status": "allocating devices to pods with ResourceClaims (DRA)",
	// No request of its own: kube-apiserver asks its authorizer for it when
	// the scheduler writes a claim's allocation through status (exercised
	// by TestDevicesFollowTheirPods, which fails without it).
	"update resource.k8s.io/resourceclaims/binding": "writing a claim's allocation and reservedFor (DRA)",
	"patch resource.k8s.io/resourceclaims/binding":  "writing a claim's allocation and reservedFor (DRA)",
	"update pods/finalizers":                        "allocating devices to pods with ResourceClaims (DRA)",
	"patch pods/status":                             "conditions of pods that fit nowhere, nominated nodes",
	"patch events":                                  "repeated events are patched, not created again",
	"patch events.k8s.io/events":                    "events.k8s.io is used where the apiserver serves it to the client's discovery",
	"create coordination.k8s.io/leases":             "the first start in a cluster creates the Lease",
}

// TestSchedulerRBAC: rebalancer-scheduler ran the suite's scheduling as its
// ServiceAccount with manifests/scheduler's RBAC (needScheduler). Every
// request it made was allowed and is granted by those rules, and every rule
// was used, but for the paths in notExercised.
func TestSchedulerRBAC(t *testing.T) {
	needScheduler(t)
	used := auditedVerbs(t, "system:serviceaccount:rebalancer-system:rebalancer-scheduler", scheduler.started)
	if seen := checkRBAC(t, "scheduler/rbac.yaml", used, notExercised); !seen["create pods/binding"] {
		t.Fatal("the scheduler bound no pod in this run: nothing to check")
	}
	t.Logf("%d distinct requests by the rebalancer-scheduler ServiceAccount, all granted:\n%s", len(used), joinRequests(used))
}
