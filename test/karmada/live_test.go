//go:build karmadalive

// The live test: real Karmada components (karmada-apiserver,
// karmada-aggregated-apiserver, karmada-controller-manager,
// karmada-scheduler) over two real member control planes with KWOK nodes,
// each member with its own `rebalancer estimator` process, as
// hack/karmada-cluster.sh starts them (make test-karmada-live). It checks
// that Karmada divides replicas by what the estimators answer: no member is
// given more replicas of a one-pod-per-node workload than it has nodes,
// where summing resources would give it more.
package karmada

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	estimatorclient "github.com/karmada-io/karmada/pkg/estimator/client"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	"github.com/karmada-io/karmada/pkg/util"
	"github.com/karmada-io/karmada/pkg/util/grpcconnection"
	"github.com/karmada-io/karmada/pkg/util/names"
)

var members = []string{"member1", "member2"}

// harness is hack/karmada-cluster.sh's: clients of karmada-apiserver and
// of each member, and where each member's estimator serves /readyz.
type harness struct {
	t         *testing.T
	ctx       context.Context
	karmada   *kubernetes.Clientset
	policies  *karmadaclient.Clientset
	member    map[string]*kubernetes.Clientset
	readyz    map[string]string
	estimator *estimatorclient.SchedulerEstimator
	ns        string
}

// env is the variable's value, else `hack/karmada-cluster.sh env`'s default.
func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	dir, err := filepath.Abs("../../_output/karmada-cluster")
	if err != nil {
		t.Fatal(err)
	}
	configs := map[string]string{"karmada": env("KARMADA_KUBECONFIG", filepath.Join(dir, "karmada/admin.kubeconfig"))}
	for _, m := range members {
		configs[m] = env(strings.ToUpper(m)+"_KUBECONFIG", filepath.Join(dir, m, "admin.kubeconfig"))
	}
	for name, path := range configs {
		if _, err := os.Stat(path); err != nil {
			t.Skipf("no kubeconfig of %s at %s: start the harness with hack/karmada-cluster.sh up (or run make test-karmada-live)", name, path)
		}
	}
	h := &harness{t: t, ctx: t.Context(), member: map[string]*kubernetes.Clientset{}, readyz: map[string]string{
		"member1": env("MEMBER1_ESTIMATOR", "http://127.0.0.1:24353") + "/readyz",
		"member2": env("MEMBER2_ESTIMATOR", "http://127.0.0.1:25353") + "/readyz",
	}}
	restConfig := func(path string) *kubernetes.Clientset {
		c, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			t.Fatal(err)
		}
		if h.policies == nil {
			h.policies = karmadaclient.NewForConfigOrDie(c)
		}
		return kubernetes.NewForConfigOrDie(c)
	}
	h.karmada = restConfig(configs["karmada"])
	for _, m := range members {
		h.member[m] = restConfig(configs[m])
	}
	// The estimators as karmada-scheduler reaches them: through the
	// Services on karmada-apiserver.
	cache := estimatorclient.NewSchedulerEstimatorCache()
	for _, m := range members {
		info := estimatorclient.SchedulerEstimatorServiceInfo{Name: m, NamePrefix: names.KarmadaSchedulerEstimatorComponentName, Namespace: names.NamespaceKarmadaSystem}
		if err := estimatorclient.EstablishConnection(h.karmada, info, cache, &grpcconnection.ClientConfig{TargetPort: 10352}); err != nil {
			t.Fatal(err)
		}
	}
	h.estimator = estimatorclient.NewSchedulerEstimator(cache, 3*time.Second)
	h.idle()
	return h
}

// idle waits until the members run no pod of an earlier test (its
// namespace on karmada-apiserver deleted, Karmada deletes the member's):
// each test starts from empty nodes.
func (h *harness) idle() {
	h.t.Helper()
	for _, m := range members {
		h.poll(m+" idle", 2*time.Minute, func() (bool, string) {
			pods, err := h.member[m].CoreV1().Pods("").List(h.ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			var left []string
			for _, p := range pods.Items {
				if strings.HasPrefix(p.Namespace, "live-") {
					left = append(left, p.Namespace+"/"+p.Name)
				}
			}
			return len(left) == 0, fmt.Sprintf("pods of earlier tests: %v", left)
		})
	}
}

// poll calls f until it says done, failing the test with f's last word
// after timeout.
func (h *harness) poll(what string, timeout time.Duration, f func() (bool, string)) {
	h.t.Helper()
	var last string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		var done bool
		if done, last = f(); done {
			return
		}
	}
	h.t.Fatalf("%s: not within %s; last: %s", what, timeout, last)
}

// estimatorsReady waits for each estimator's /readyz: Karmada divides
// replicas only when it schedules, and an estimator that is not ready then
// is left out.
func (h *harness) estimatorsReady() {
	h.t.Helper()
	for _, m := range members {
		h.poll(m+"'s estimator ready", time.Minute, func() (bool, string) {
			res, err := http.Get(h.readyz[m])
			if err != nil {
				return false, err.Error()
			}
			res.Body.Close()
			return res.StatusCode == http.StatusOK, res.Status
		})
	}
}

// nodes counts each member's Ready nodes: a workload of one pod per node
// (required hostname anti-affinity) runs at most this many replicas there.
func (h *harness) nodes() (map[string]int32, map[string]resource.Quantity) {
	h.t.Helper()
	count, cpu := map[string]int32{}, map[string]resource.Quantity{}
	for _, m := range members {
		list, err := h.member[m].CoreV1().Nodes().List(h.ctx, metav1.ListOptions{})
		if err != nil {
			h.t.Fatal(err)
		}
		sum := resource.Quantity{}
		for _, n := range list.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && !n.Spec.Unschedulable {
					count[m]++
					sum.Add(n.Status.Allocatable[corev1.ResourceCPU])
				}
			}
		}
		cpu[m] = sum
	}
	return count, cpu
}

// namespace creates this test's namespace on karmada-apiserver, which
// Karmada creates in the members, and deletes it at the end.
func (h *harness) namespace() {
	h.t.Helper()
	h.ns = "live-" + rand.String(5)
	if _, err := h.karmada.CoreV1().Namespaces().Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.ns}}, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		_ = h.karmada.CoreV1().Namespaces().Delete(context.Background(), h.ns, metav1.DeleteOptions{})
	})
}

// deployment is app's Deployment on karmada-apiserver: replicas of 1 CPU
// that keep one per node (required hostname anti-affinity on their own
// labels).
func (h *harness) deployment(app string, replicas int32) {
	h.t.Helper()
	labels := map[string]string{"app": app}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: h.ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
							LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
							TopologyKey:   corev1.LabelHostname,
						}},
					}},
					Containers: []corev1.Container{{Name: app, Image: app, Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("128Mi")},
					}}},
				},
			},
		},
	}
	if _, err := h.karmada.AppsV1().Deployments(h.ns).Create(h.ctx, d, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// policy propagates app's Deployment to the members. Its permanent ID is
// set here, as karmada-webhook would set it (the harness runs none).
func (h *harness) policy(app string, placement policyv1alpha1.Placement) {
	h.t.Helper()
	p := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: h.ns,
			Labels: map[string]string{policyv1alpha1.PropagationPolicyPermanentIDLabel: uuid.NewString()}},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: app, Namespace: h.ns}},
			Placement:         placement,
		},
	}
	if _, err := h.policies.PolicyV1alpha1().PropagationPolicies(h.ns).Create(h.ctx, p, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) binding(app string) (*workv1alpha2.ResourceBinding, error) {
	return h.policies.WorkV1alpha2().ResourceBindings(h.ns).Get(h.ctx, names.GenerateBindingName("Deployment", app), metav1.GetOptions{})
}

// scheduled waits until the binding is scheduled for the Deployment's
// current generation with replicas replicas in all, and returns its
// assignment.
func (h *harness) scheduled(app string, replicas int32) map[string]int32 {
	h.t.Helper()
	var got map[string]int32
	h.poll(fmt.Sprintf("%s scheduled with %d replicas", app, replicas), 2*time.Minute, func() (bool, string) {
		rb, err := h.binding(app)
		if err != nil {
			return false, err.Error()
		}
		got = assignment(rb)
		cond := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha2.Scheduled)
		if rb.Spec.Replicas != replicas || cond == nil || cond.Status != metav1.ConditionTrue || rb.Status.SchedulerObservedGeneration != rb.Generation {
			return false, fmt.Sprintf("spec.replicas %d, clusters %v, Scheduled %+v", rb.Spec.Replicas, got, cond)
		}
		var sum int32
		for _, n := range got {
			sum += n
		}
		return sum == replicas, fmt.Sprintf("clusters %v", got)
	})
	return got
}

func assignment(rb *workv1alpha2.ResourceBinding) map[string]int32 {
	got := map[string]int32{}
	for _, c := range rb.Spec.Clusters {
		got[c.Name] = c.Replicas
	}
	return got
}

// running waits until each member runs exactly its assigned replicas of
// app, all Running on a node, and no pod of app Pending.
func (h *harness) running(app string, want map[string]int32) {
	h.t.Helper()
	for _, m := range members {
		h.poll(fmt.Sprintf("%s: %d replicas of %s Running", m, want[m], app), 2*time.Minute, func() (bool, string) {
			pods, err := h.member[m].CoreV1().Pods(h.ns).List(h.ctx, metav1.ListOptions{LabelSelector: "app=" + app})
			if err != nil {
				return false, err.Error()
			}
			var running, pending int32
			var nodes []string
			for _, p := range pods.Items {
				if p.DeletionTimestamp != nil {
					continue
				}
				switch {
				case p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "":
					running++
					nodes = append(nodes, p.Spec.NodeName)
				case p.Status.Phase == corev1.PodPending:
					pending++
				}
			}
			slices.Sort(nodes)
			if len(slices.Compact(nodes)) != len(nodes) {
				h.t.Fatalf("%s: two pods of %s on one node despite their anti-affinity: %v", m, app, nodes)
			}
			return running == want[m] && pending == 0, fmt.Sprintf("%d Running, %d Pending", running, pending)
		})
	}
}

// answers asks each member's estimator, as karmada-scheduler asks it, how
// many more replicas of app fit.
func (h *harness) answers(app string) map[string]int32 {
	h.t.Helper()
	ctx := context.WithValue(h.ctx, util.ContextKeyObject, fmt.Sprintf("kind=Deployment, name=%s/%s", h.ns, app))
	var clusters []*clusterv1alpha1.Cluster
	for _, m := range members {
		clusters = append(clusters, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: m}})
	}
	res, err := h.estimator.MaxAvailableReplicas(ctx, clusters, &workv1alpha2.ReplicaRequirements{
		ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Namespace:       h.ns,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	got := map[string]int32{}
	for _, r := range res {
		got[r.Name] = r.Replicas
	}
	return got
}

// settled waits until each estimator answers that exactly the nodes app
// does not use yet are left: it has seen app's pods, so the next division
// starts from what runs.
func (h *harness) settled(app string, nodes, assigned map[string]int32) {
	h.t.Helper()
	h.poll("the estimators to see "+app+"'s pods", time.Minute, func() (bool, string) {
		got := h.answers(app)
		for _, m := range members {
			if got[m] != nodes[m]-assigned[m] {
				return false, fmt.Sprintf("answers %v, want nodes %v less assigned %v", got, nodes, assigned)
			}
		}
		return true, ""
	})
}

func dividedByAvailableReplicas(clusters ...string) policyv1alpha1.Placement {
	return policyv1alpha1.Placement{
		ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: clusters},
		ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
			WeightPreference:          &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas},
		},
	}
}

// TestLiveDivision: a one-pod-per-node Deployment propagated to both
// members, divided by available replicas. member1 has more nodes, member2
// more CPU: Karmada's general estimator (resources summed) would give
// member2 the larger share, more replicas than it has nodes; the
// estimators answer each member's node count, and Karmada's division must
// keep every member within it, whatever it is scaled to.
func TestLiveDivision(t *testing.T) {
	h := newHarness(t)
	nodes, cpu := h.nodes()
	var capacity int32
	for _, m := range members {
		capacity += nodes[m]
	}
	cpu1, cpu2 := cpu["member1"], cpu["member2"]
	t.Logf("members' Ready nodes %v, CPU member1 %s, member2 %s", nodes, cpu1.String(), cpu2.String())
	// The premise: resources alone would favour the member with fewer
	// nodes; otherwise this test could pass without the estimators.
	if nodes["member1"] <= nodes["member2"] || cpu1.Cmp(cpu2) >= 0 {
		t.Fatalf("the harness's members are not as the test needs (member1 more nodes, member2 more CPU): nodes %v, CPU %v", nodes, cpu)
	}
	h.estimatorsReady()
	h.namespace()
	const app = "web"
	// Before the workload exists anywhere, the estimators answer from its
	// resource template on karmada-apiserver.
	h.deployment(app, 10)
	created := time.Now()
	first := h.answers(app)
	h.poll("the estimators to answer the members' node counts for "+app, time.Minute, func() (bool, string) {
		got := h.answers(app)
		return got["member1"] == nodes["member1"] && got["member2"] == nodes["member2"], fmt.Sprintf("answers %v, nodes %v", got, nodes)
	})
	t.Logf("estimators' answers right after the template's creation %v, the node counts %s after it", first, time.Since(created).Round(time.Millisecond))
	h.policy(app, dividedByAvailableReplicas(members...))

	check := func(replicas int32) map[string]int32 {
		t.Helper()
		got := h.scheduled(app, replicas)
		t.Logf("%d replicas divided %v", replicas, got)
		for _, m := range members {
			if got[m] > nodes[m] {
				t.Errorf("%d replicas: %s assigned %d replicas, more than its %d nodes can run one per node", replicas, m, got[m], nodes[m])
			}
		}
		h.running(app, got)
		h.settled(app, nodes, got)
		return got
	}

	// a. A new workload: within each member's nodes, all Running.
	check(10)

	// b. Scaled up to exactly the members' nodes: every node one replica.
	scale(t, h, app, capacity)
	if got := check(capacity); !mapsEqual(got, nodes) {
		t.Errorf("%d replicas divided %v, want one per node %v", capacity, got, nodes)
	}

	// Beyond them: Karmada divides all or nothing, so the binding says it
	// cannot schedule and the members keep what they run.
	before, err := h.binding(app)
	if err != nil {
		t.Fatal(err)
	}
	scale(t, h, app, capacity+6)
	// Scheduled was True for capacity replicas: False now is this scale's
	// (a failed attempt leaves schedulerObservedGeneration behind).
	h.poll("the binding to report it cannot schedule", 2*time.Minute, func() (bool, string) {
		rb, err := h.binding(app)
		if err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha2.Scheduled)
		return rb.Spec.Replicas == capacity+6 && cond != nil && cond.Status == metav1.ConditionFalse,
			fmt.Sprintf("spec.replicas %d, Scheduled %+v", rb.Spec.Replicas, cond)
	})
	rb, err := h.binding(app)
	if err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha2.Scheduled)
	t.Logf("%d replicas: Scheduled %s %s: %s", capacity+6, cond.Status, cond.Reason, cond.Message)
	if got, want := assignment(rb), assignment(before); !mapsEqual(got, want) {
		t.Errorf("%d replicas: the binding's clusters changed to %v from %v although it could not schedule", capacity+6, got, want)
	}
	// The members go on running one replica per node, none Pending,
	// for a while after the scale.
	for range 3 {
		h.running(app, nodes)
		time.Sleep(2 * time.Second)
	}
}

// TestLiveDivisionAppliedTogether: a Deployment and its PropagationPolicy
// applied one right after the other, as `kubectl apply -f` of one file does:
// Karmada asks the estimators at once, before their watch of the resource
// templates may have delivered the new one, and they must still answer from
// the template (reading it from karmada-apiserver), not from the requests
// alone, which would give member2, with more CPU, more replicas than its
// nodes.
func TestLiveDivisionAppliedTogether(t *testing.T) {
	h := newHarness(t)
	nodes, _ := h.nodes()
	h.estimatorsReady()
	h.namespace()
	const app = "together"
	var replicas int32 = 10
	h.deployment(app, replicas)
	h.policy(app, dividedByAvailableReplicas(members...))
	got := h.scheduled(app, replicas)
	t.Logf("%d replicas divided %v (nodes %v)", replicas, got, nodes)
	for _, m := range members {
		if got[m] > nodes[m] {
			t.Errorf("%s assigned %d replicas, more than its %d nodes can run one per node", m, got[m], nodes[m])
		}
	}
	h.running(app, got)
}

// TestLiveDivisionWithoutEstimators is the control: the same workload with
// karmada-scheduler asking no estimator, only its general one, which sums
// the members' resources. It documents what the estimators change: member2,
// with more CPU, is given more replicas than its nodes can run one per
// node, and the rest stay Pending there.
func TestLiveDivisionWithoutEstimators(t *testing.T) {
	h := newHarness(t)
	nodes, _ := h.nodes()
	h.restartScheduler("", strings.TrimSpace(os.Getenv("KARMADA_SCHEDULER_ARGS")+" --enable-scheduler-estimator=false"))
	h.namespace()
	const app = "web"
	h.deployment(app, 10)
	h.policy(app, dividedByAvailableReplicas(members...))
	got := h.scheduled(app, 10)
	t.Logf("without estimators, 10 replicas divided %v", got)
	if got["member2"] <= nodes["member2"] {
		t.Fatalf("without estimators member2 was given %d replicas, within its %d nodes: the control does not show what the estimators change", got["member2"], nodes["member2"])
	}
	h.poll("member2's excess replicas Pending", 2*time.Minute, func() (bool, string) {
		pods, err := h.member["member2"].CoreV1().Pods(h.ns).List(h.ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err.Error()
		}
		var pending int32
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodPending {
				pending++
			}
		}
		return pending == got["member2"]-nodes["member2"], fmt.Sprintf("%d Pending", pending)
	})
}

// restartScheduler starts the harness's karmada-scheduler again from bin
// ("" for the harness's) with args, and again as it was when the test ends.
func (h *harness) restartScheduler(bin, args string) {
	h.t.Helper()
	h.restart(bin, args)
	h.t.Cleanup(func() { h.restart(os.Getenv("KARMADA_SCHEDULER"), os.Getenv("KARMADA_SCHEDULER_ARGS")) })
}

// restart runs `hack/karmada-cluster.sh restart-scheduler` and, unless
// args turn the estimators off, waits until the scheduler has connected to
// each member's: one that schedules before would leave them out.
func (h *harness) restart(bin, args string) {
	h.t.Helper()
	cmd := exec.Command("../../hack/karmada-cluster.sh", "restart-scheduler")
	cmd.Env = append(os.Environ(), "KARMADA_SCHEDULER_ARGS="+args)
	if bin != "" {
		cmd.Env = append(cmd.Env, "KARMADA_SCHEDULER="+bin)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		h.t.Fatalf("restarting karmada-scheduler (%s %s): %v\n%s", bin, args, err, out)
	}
	if strings.Contains(args, "--enable-scheduler-estimator=false") {
		return
	}
	log := filepath.Join(env("KARMADA_DIR", "../../_output/karmada-cluster"), "logs/karmada-scheduler.log")
	h.poll("karmada-scheduler connected to the estimators", time.Minute, func() (bool, string) {
		b, err := os.ReadFile(log)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range members {
			if !strings.Contains(string(b), fmt.Sprintf("of cluster(%s) has been established", m)) {
				return false, "no connection to " + m + "'s estimator in " + log
			}
		}
		return true, ""
	})
}

// TestLiveRebalancerScore runs rebalancer-karmada-scheduler
// ($REBALANCER_KARMADA_SCHEDULER: karmada-scheduler with the Filter and
// Score plugin RebalancerEstimate, which asks the members' estimators) in
// the harness's place, and a one-pod-per-node Deployment of 4 replicas
// placed in one cluster of the two (spread constraint: 1 group of
// clusters), so the clusters' scores choose. With --rebalancer-score=pack
// the cluster the workload fills most tightly wins: the smallest estimate
// that still holds the replicas; with spread, the largest. Karmada's own
// tie order (more available replicas, then the name) picks the largest:
// pack must overturn it, and spread must pick other than pack.
func TestLiveRebalancerScore(t *testing.T) {
	bin := os.Getenv("REBALANCER_KARMADA_SCHEDULER")
	if bin == "" {
		t.Skip("REBALANCER_KARMADA_SCHEDULER does not name a rebalancer-karmada-scheduler binary")
	}
	const replicas = 4
	var picked []string
	for _, score := range []string{"pack", "spread"} {
		t.Run(score, func(t *testing.T) {
			h := newHarness(t)
			h.restartScheduler(bin, "--rebalancer-score="+score)
			h.estimatorsReady()
			h.namespace()
			app := "web-" + score
			h.deployment(app, replicas)
			// Until an estimator has read the new template, it answers from
			// the requests alone: more than one per node.
			nodes, _ := h.nodes()
			var answers map[string]int32
			h.poll("the estimators to answer for "+app+" from its template", time.Minute, func() (bool, string) {
				answers = h.answers(app)
				for _, m := range members {
					if answers[m] > nodes[m] {
						return false, fmt.Sprintf("answers %v, nodes %v", answers, nodes)
					}
				}
				return true, ""
			})
			// The general rule over the estimators' answers.
			var want, byDefault string
			for _, m := range members {
				if answers[m] < replicas {
					continue
				}
				if want == "" || (score == "pack" && answers[m] < answers[want]) || (score == "spread" && answers[m] > answers[want]) {
					want = m
				}
				if byDefault == "" || answers[m] > answers[byDefault] {
					byDefault = m
				}
			}
			if want == "" {
				t.Fatalf("no member holds %d replicas: answers %v", replicas, answers)
			}
			if score == "pack" && want == byDefault {
				t.Fatalf("the harness cannot tell pack from Karmada's tie order: both pick %s (answers %v)", want, answers)
			}
			placement := dividedByAvailableReplicas(members...)
			placement.SpreadConstraints = []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 1, MaxGroups: 1}}
			h.policy(app, placement)
			got := h.scheduled(app, replicas)
			t.Logf("%s: answers %v, %d replicas placed %v", score, answers, replicas, got)
			if len(got) != 1 || got[want] != replicas {
				t.Errorf("%s: %d replicas placed %v, want all in %s (answers %v)", score, replicas, got, want, answers)
			}
			h.running(app, got)
			for m := range got {
				picked = append(picked, m)
			}
		})
	}
	if len(picked) == 2 && picked[0] == picked[1] {
		t.Errorf("pack and spread placed the replicas in the same member %s: --rebalancer-score changed nothing", picked[0])
	}
}

func scale(t *testing.T, h *harness, app string, replicas int32) {
	t.Helper()
	s, err := h.karmada.AppsV1().Deployments(h.ns).GetScale(h.ctx, app, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Replicas = replicas
	if _, err := h.karmada.AppsV1().Deployments(h.ns).UpdateScale(h.ctx, app, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func mapsEqual(a, b map[string]int32) bool {
	for _, m := range members {
		if a[m] != b[m] {
			return false
		}
	}
	return true
}
