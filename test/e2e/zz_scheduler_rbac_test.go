//go:build e2e

package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// This file's name sorts last: go test runs a package's tests in file order,
// so TestSchedulerRBAC sees every request the scheduler made for the tests
// before it.

// notExercised are the rules of manifests/scheduler/rbac.yaml that the suite
// does not reach, and why the scheduler needs them.
var notExercised = map[string]string{
	"delete pods":                                  "preemption of lower-priority pods",
	"get persistentvolumeclaims":                   "binding WaitForFirstConsumer volumes",
	"update persistentvolumeclaims":                "binding WaitForFirstConsumer volumes",
	"get persistentvolumes":                        "binding WaitForFirstConsumer volumes",
	"update persistentvolumes":                     "binding WaitForFirstConsumer volumes",
	"get resource.k8s.io/resourceclaims/status":    "allocating devices to pods with ResourceClaims (DRA)",
	"update resource.k8s.io/resourceclaims/status": "allocating devices to pods with ResourceClaims (DRA)",
	"patch resource.k8s.io/resourceclaims/status":  "allocating devices to pods with ResourceClaims (DRA)",
	"update pods/finalizers":                       "allocating devices to pods with ResourceClaims (DRA)",
	"patch pods/status":                            "conditions of pods that fit nowhere, nominated nodes",
	"patch events":                                 "repeated events are patched, not created again",
	"patch events.k8s.io/events":                   "events.k8s.io is used where the apiserver serves it to the client's discovery",
	"create coordination.k8s.io/leases":            "the first start in a cluster creates the Lease",
}

// TestSchedulerRBAC: rebalancer-scheduler ran the suite's scheduling as its
// ServiceAccount with manifests/scheduler's RBAC (needScheduler). Every
// request it made was allowed and is granted by those rules, and every rule
// was used, but for the paths in notExercised.
func TestSchedulerRBAC(t *testing.T) {
	needScheduler(t)
	used := auditedVerbs(t, "system:serviceaccount:rebalancer-system:rebalancer-scheduler", scheduler.started)
	var cr rbacv1.ClusterRole
	var role rbacv1.Role
	decodeManifest(t, filepath.Join(repoRoot, "manifests", "scheduler", "rbac.yaml"), &cr, &role)
	rules := append(append([]rbacv1.PolicyRule{}, cr.Rules...), role.Rules...)
	seen := map[string]bool{}
	for _, u := range used {
		if u.code == 403 {
			t.Errorf("forbidden: %s", u)
		}
		if !granted(rules, u) {
			t.Errorf("not granted by manifests/scheduler/rbac.yaml: %s", u)
		}
		seen[ruleKey(u.verb, u.group, resourceOf(u))] = true
	}
	bound := false
	for k := range seen {
		bound = bound || k == "create pods/binding"
	}
	if !bound {
		t.Fatal("the scheduler bound no pod in this run: nothing to check")
	}
	for _, k := range unusedRules(rules, seen, notExercised) {
		t.Errorf("manifests/scheduler/rbac.yaml grants %q, which the scheduler never used", k)
	}
	t.Logf("%d distinct requests by the rebalancer-scheduler ServiceAccount, all granted:\n%s", len(used), joinRequests(used))
}

// unusedRules lists the verbs the rules grant that no request used, but for
// those in allowed.
func unusedRules(rules []rbacv1.PolicyRule, seen map[string]bool, allowed map[string]string) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					k := ruleKey(v, g, res)
					switch {
					case seen[k]:
					case v == "list" && seen[ruleKey("watch", g, res)]:
						// The informer's initial list is a watch-list here;
						// LIST is its fallback.
					case allowed[k] != "":
					default:
						out = append(out, k)
					}
				}
			}
		}
	}
	return out
}

func resourceOf(r request) string {
	if r.subresource != "" {
		return r.resource + "/" + r.subresource
	}
	return r.resource
}

func ruleKey(verb, group, resource string) string {
	if group == "" {
		return verb + " " + resource
	}
	return verb + " " + strings.TrimSuffix(group, "/") + "/" + resource
}
