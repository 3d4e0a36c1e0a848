//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/profile"
)

// clusterSchedulerConfig is the configuration the local control plane's
// kube-scheduler runs with (hack/local-cluster.sh): kube-scheduler's default
// profile as default-scheduler, with rebalancer's extender as
// policies/default-scheduler-extender.yaml adds it. rebalancer is given the
// same file, as a user gives it their kube-scheduler's.
func clusterSchedulerConfig(t *testing.T) (path, address string) {
	t.Helper()
	path = filepath.Join(filepath.Dir(kubeconfig), "kube-scheduler.yaml")
	cfg, err := profile.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Extenders) != 1 {
		t.Fatalf("%s lists %d extenders; restart the control plane with this tree's hack/local-cluster.sh", path, len(cfg.Extenders))
	}
	u, err := url.Parse(cfg.Extenders[0].URLPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return path, u.Host
}

// startExtender runs `rebalancer extender` where the cluster's kube-scheduler
// calls it, with the kubeconfig given and more flags, and waits until it is
// ready.
func startExtender(t *testing.T, e *testEnv, kc string, flags ...string) *process {
	t.Helper()
	_, addr := clusterSchedulerConfig(t)
	p := startProcess(t, "rebalancer", append([]string{"extender", "--bind-address=" + addr, "--kubeconfig", kc, "-v=2"}, flags...)...)
	p.waitUp(e, "the extender to be ready", func() bool { return answers("http://" + addr + "/readyz") })
	return p
}

// narrowedPolicy is the shipped bin-packing policy limited to this test's
// nodes, so that its per-cycle limits are not spent on other tests' nodes.
func (e *testEnv) narrowedPolicy() string {
	e.t.Helper()
	shipped, err := os.ReadFile(filepath.Join(repoRoot, "policies", "binpacking-policy.yaml"))
	if err != nil {
		e.t.Fatal(err)
	}
	policy := filepath.Join(e.t.TempDir(), "policy.yaml")
	narrowed := fmt.Sprintf("%s\nnodeSelector: %s=%s\n", shipped, testLabel, e.name)
	if err := os.WriteFile(policy, []byte(narrowed), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return policy
}

// TestExtenderSteersDefaultScheduler: a thin cluster of default-scheduler
// workloads, with kube-scheduler's default profile plus rebalancer's
// extender (run as the ServiceAccount of manifests/extender). One
// `run --once` under the shipped bin-packing policy empties nodes down to
// the lower bound; kube-scheduler puts the replacements on their planned
// targets, never back on their source; a second run plans nothing. The
// extender's requests are exactly what its ClusterRole grants. Then the
// extender is stopped: pods are still scheduled (it is ignorable), and the
// next run plans no move of default-scheduler's pods rather than evicting
// them blind.
func TestExtenderSteersDefaultScheduler(t *testing.T) {
	e := newTestEnv(t)
	kc := e.asServiceAccount(filepath.Join(repoRoot, "manifests", "extender", "rbac.yaml"), "rebalancer-extender")
	started := time.Now()
	ext := startExtender(t, e, kc)
	clusterConfig, addr := clusterSchedulerConfig(t)

	nodes := e.nodeNames("ext", 6)
	e.addNodes("8", nodes...)
	e.fragmentedReplicaSetOf("default-scheduler", "web", resources("1", "1Gi"), append(append([]string{}, nodes...), nodes...))
	e.fragmentedReplicaSetOf("default-scheduler", "api", resources("1", "1Gi"), nodes)
	before := append(e.boundPods("web", 12), e.boundPods("api", 6)...)
	beforeUIDs := uidsOf(before)
	args := []string{"--policy", e.narrowedPolicy(), "--scheduler-config", clusterConfig}

	res := runOnce(t, args...)
	var mine []plan.Move
	for _, m := range res.Plan.Moves {
		if m.Namespace == e.ns {
			mine = append(mine, m)
			if m.Scheduler != "default-scheduler" || !m.Steered {
				t.Errorf("move of %s: scheduler %q steered %v; want steered default-scheduler moves", m.Pod, m.Scheduler, m.Steered)
			}
		}
	}
	evicted := 0
	for _, m := range res.Result.Evicted {
		if m.Namespace == e.ns {
			evicted++
		}
	}
	if len(mine) == 0 || evicted != len(mine) {
		t.Fatalf("planned %d moves here, evicted %d; skipped %v; warnings %q", len(mine), evicted, res.Plan.Summary.SkippedByReason, res.Plan.Warnings)
	}

	after := append(e.boundPods("web", 12), e.boundPods("api", 6)...)
	onTarget, backOnSource := landed(mine, beforeUIDs, after)
	inUse := func(pods []v1.Pod) int { c, _ := perNode(pods); return len(c) }
	_, summary := perNode(after)
	t.Logf("%d moves evicted; %d replacements on their planned target, %d back on a source; nodes in use %d -> %d: %s",
		evicted, onTarget, backOnSource, inUse(before), inUse(after), summary)
	if onTarget != evicted {
		t.Errorf("only %d of %d replacements landed on their planned target", onTarget, evicted)
	}
	if backOnSource > 0 {
		t.Errorf("%d replacements landed back on the node they were evicted from", backOnSource)
	}
	// 18 pods of 1 CPU on nodes of 8: 3 nodes at the least.
	if inUse(after) != 3 {
		t.Errorf("nodes in use %d -> %d, want the lower bound, 3", inUse(before), inUse(after))
	}
	if consumed := metricValue(t, "http://"+addr+"/metrics", "rebalancer_extender_hints_consumed_total"); consumed < float64(evicted) {
		t.Errorf("the extender consumed %v hints for %d evictions", consumed, evicted)
	}

	again := runOnce(t, args...)
	for _, m := range again.Plan.Moves {
		if m.Namespace == e.ns {
			t.Errorf("second run plans %s %s -> %s (%s)", m.Pod, m.Source, m.Target, m.Strategy)
		}
	}

	// The extender's requests, as the ServiceAccount of manifests/extender.
	ext.terminate(t, 20*time.Second)
	used := auditedVerbs(t, "system:serviceaccount:rebalancer-system:rebalancer-extender", started)
	checkRBAC(t, "extender/rbac.yaml", used, nil)

	// Down: kube-scheduler still places pods. Three more api pods spread
	// onto the emptied nodes (kube-scheduler's default profile), and the
	// next run plans no move of them without the extender.
	rs, err := client.AppsV1().ReplicaSets(e.ns).Get(e.ctx, "api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs.Spec.Replicas = ptr.To[int32](9)
	if _, err := client.AppsV1().ReplicaSets(e.ns).Update(e.ctx, rs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.boundPods("api", 9)
	down := runOnce(t, args...)
	for _, m := range down.Plan.Moves {
		if m.Namespace == e.ns {
			t.Errorf("with the extender down the run plans %s %s -> %s (%s)", m.Pod, m.Source, m.Target, m.Strategy)
		}
	}
	said := false
	for _, w := range down.Plan.Warnings {
		said = said || strings.Contains(w, "does not answer")
	}
	if !said {
		t.Errorf("the plan does not say the extender is down: %q", down.Plan.Warnings)
	}
	why := map[string]int{}
	for _, s := range down.Plan.Skipped {
		if strings.HasPrefix(s.Pod, e.ns+"/") {
			why[s.Reason]++
		}
	}
	if why[plan.ReasonConflict]+why[plan.ReasonUnsteered] == 0 {
		t.Errorf("no conflict or unsteered skip for this cluster's pods with the extender down: %v", why)
	}
}

// metricValue reads one unlabelled sample from a /metrics page.
func metricValue(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		var v float64
		if strings.HasPrefix(line, name+" ") {
			if _, err := fmt.Sscanf(line[len(name)+1:], "%g", &v); err == nil {
				return v
			}
		}
	}
	t.Fatalf("%s has no sample of %s", url, name)
	return 0
}

// TestExtenderManifests: manifests/extender applies to the real apiserver
// (server-side dry-run, strict validation), hardened like the others.
func TestExtenderManifests(t *testing.T) {
	for _, u := range dryRunManifests(t, "extender", "deployment.apps/rebalancer-extender", "service/rebalancer-extender",
		"clusterrole.rbac.authorization.k8s.io/rebalancer-extender", "poddisruptionbudget.policy/rebalancer-extender") {
		if u.GetKind() == "Deployment" {
			checkPodSpec(t, "Deployment/"+u.GetName(), podSpecOf(t, u))
		}
	}
}

// dryRunManifests applies manifests/dir with server-side dry-run and strict
// validation, checks that the output names each of want, and returns the
// rendered objects.
func dryRunManifests(t *testing.T, dir string, want ...string) []*unstructured.Unstructured {
	t.Helper()
	path := filepath.Join(repoRoot, "manifests", dir)
	out := kubectl(t, "apply", "--server-side", "--dry-run=server", "--field-manager=rebalancer-e2e", "--validate=strict", "-k", path)
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("dry-run output lacks %s:\n%s", w, out)
		}
	}
	return decodeAll(t, kubectl(t, "kustomize", path))
}

// TestExtenderFollowsRollouts: `kubectl rollout restart` of a
// default-scheduler Deployment of 6 replicas (not sticky), 2 a node on 3
// nodes, beside an empty node that kube-scheduler's default profile
// (LeastAllocated) prefers for every new pod. With the extender's
// --follow-rollouts the new pods go back to the nodes the old ones leave,
// one new pod per old pod: at least 5 of 6. roomy: each node has room for
// its old and new pods side by side; tight: for one surge pod beside its
// two old ones, so a new pod is scored only onto an old pod's node it
// fits on, and a node's second new pod fits there only once an old pod
// left.
func TestExtenderFollowsRollouts(t *testing.T) {
	for _, tc := range []struct{ name, homeCPU string }{{"roomy", "8"}, {"tight", "3"}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t)
			kc := e.asServiceAccount(filepath.Join(repoRoot, "manifests", "extender", "rbac.yaml"), "rebalancer-extender")
			startExtender(t, e, kc, "--follow-rollouts")
			nodes := e.nodeNames(tc.name, 4)
			homes, empty := nodes[:3], nodes[3]
			const onEach, replicas = 2, 6
			app := "web-" + tc.name
			old := e.deploymentOnEach("default-scheduler", app, tc.homeCPU, homes, onEach, nil)
			e.addNodes("8", empty)
			if back := e.rolloutRestart(app, old); back < replicas-1 {
				t.Errorf("%d of %d new pods on a node an old pod left, want at least %d", back, replicas, replicas-1)
			}
		})
	}
}
