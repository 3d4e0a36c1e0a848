package estimator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/descheduler/pkg/api"

	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/estimator/pb"
	"github.com/rebalancer-dev/rebalancer/pkg/inputs"
	"github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/profile"
	"github.com/rebalancer-dev/rebalancer/pkg/session"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

func defaultProfiles(t *testing.T) []*config.KubeSchedulerProfile {
	t.Helper()
	cfg, err := profile.Default()
	if err != nil {
		t.Fatal(err)
	}
	return []*config.KubeSchedulerProfile{&cfg.Profiles[0]}
}

// newEstimator is an estimator of profiles and pol (nil: none) through a
// session of default options, as the estimator runs offline without flags.
func newEstimator(o Options, profiles []*config.KubeSchedulerProfile, pol *api.DeschedulerPolicy) *Estimator {
	return New(o, session.New(session.Options{}), &inputs.Inputs{Schedulers: profiles, Policy: pol})
}

func estimatorFor(t *testing.T, ctx context.Context, snap *snapshot.Snapshot, max int32) *Estimator {
	t.Helper()
	e := newEstimator(Options{MaxReplicas: max}, defaultProfiles(t), nil)
	if err := e.Update(ctx, snap); err != nil {
		t.Fatal(err)
	}
	return e
}

// quantities encodes requests as a client puts them on the wire.
func quantities(t *testing.T, rl v1.ResourceList) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for name, q := range rl {
		b, err := q.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		out[string(name)] = b
	}
	return out
}

func request(t *testing.T, cpu, memory string) *pb.MaxAvailableReplicasRequest {
	return &pb.MaxAvailableReplicasRequest{Cluster: "member", ReplicaRequirements: &pb.ReplicaRequirements{
		Namespace: "default",
		ResourceRequestBytes: quantities(t, v1.ResourceList{
			v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(memory)}),
	}}
}

func nodes(n int, cpu, memory string) []*v1.Node {
	out := make([]*v1.Node, n)
	for i := range out {
		out[i] = testutil.BuildTestNode(fmt.Sprintf("node-%d", i), cpu, memory)
	}
	return out
}

// deploymentPod is a running pod of Deployment name (its ReplicaSet
// name-abc, template hash abc), labelled app=name.
func deploymentPod(name, node string, i int, apply ...func(*v1.Pod)) *v1.Pod {
	p := testutil.BuildTestPod(fmt.Sprintf("%s-abc-%d", name, i), node, "100m", "100Mi", testutil.Running,
		testutil.WithLabels(map[string]string{"app": name, "pod-template-hash": "abc"}))
	p.OwnerReferences = []metav1.OwnerReference{testutil.ControllerRef("ReplicaSet", name+"-abc", types.UID(name+"-rs"))}
	p.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC))
	for _, f := range apply {
		f(p)
	}
	return p
}

func antiAffinity(name string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				TopologyKey:   v1.LabelHostname,
			}},
		}}
	}
}

// A Deployment whose pods repel each other per node has one more replica
// per node without one, however much room each node has; from its
// requests alone, every node holds many.
func TestWorkloadsPodCountsItsAntiAffinity(t *testing.T) {
	_, ctx := testutil.Context(t)
	for _, size := range []int{3, 10, 17} {
		snap := &snapshot.Snapshot{Nodes: nodes(size, "8", "16Gi"),
			Pods: []*v1.Pod{deploymentPod("web", "node-0", 0, antiAffinity("web"))}}
		e := estimatorFor(t, ctx, snap, 1000)
		got, err := e.MaxAvailableReplicas(ctx, "kind=Deployment, name=default/web", request(t, "100m", "100Mi"))
		if err != nil {
			t.Fatal(err)
		}
		if want := int32(size - 1); got != want {
			t.Errorf("%d nodes: %d more replicas of the Deployment, want %d (one per node without one)", size, got, want)
		}
		bySum, err := e.MaxAvailableReplicas(ctx, "", request(t, "100m", "100Mi"))
		if err != nil {
			t.Fatal(err)
		}
		if bySum <= got {
			t.Errorf("%d nodes: from the requests alone %d replicas, want more than the Deployment's %d", size, bySum, got)
		}
	}
}

// For replicas that ask for resources only, the answer is what each node
// has room for, summed: checked on random clusters against that sum, small
// ones and ones large enough that kube-scheduler samples their nodes.
func TestResourceOnlyReplicasFillEveryNode(t *testing.T) {
	_, ctx := testutil.Context(t)
	for seed := uint64(1); seed <= 6; seed++ {
		size := 12
		if seed > 4 {
			size = 300 // kube-scheduler scores about half of them
		}
		r := rand.New(rand.NewPCG(seed, 0))
		var snap snapshot.Snapshot
		want := 0
		reqCPU, reqMem := int64(250+r.IntN(4)*250), int64(256+r.IntN(4)*256) // millicores, MiB
		for i := range size {
			cpu, mem := int64(2000+r.IntN(7)*1000), int64(2048+r.IntN(7)*1024)
			name := fmt.Sprintf("node-%d", i)
			snap.Nodes = append(snap.Nodes, testutil.BuildTestNode(name, fmt.Sprintf("%dm", cpu), fmt.Sprintf("%dMi", mem)))
			usedCPU, usedMem := int64(0), int64(0)
			for j := range r.IntN(4) {
				c, m := int64(100+r.IntN(10)*100), int64(128+r.IntN(10)*128)
				if usedCPU+c > cpu || usedMem+m > mem {
					break
				}
				usedCPU, usedMem = usedCPU+c, usedMem+m
				snap.Pods = append(snap.Pods, testutil.BuildTestPod(fmt.Sprintf("p-%d-%d", i, j), name, fmt.Sprintf("%dm", c), fmt.Sprintf("%dMi", m), testutil.Running))
			}
			want += int(min((cpu-usedCPU)/reqCPU, (mem-usedMem)/reqMem))
		}
		e := estimatorFor(t, ctx, &snap, 10000)
		got, err := e.MaxAvailableReplicas(ctx, "", request(t, fmt.Sprintf("%dm", reqCPU), fmt.Sprintf("%dMi", reqMem)))
		if err != nil {
			t.Fatal(err)
		}
		if int(got) != want {
			t.Errorf("seed %d: %d replicas, want %d (the room of every node, summed)", seed, got, want)
		}
		// The answer left the simulation as it was: asking again gives it.
		if again, err := e.MaxAvailableReplicas(ctx, "", request(t, fmt.Sprintf("%dm", reqCPU), fmt.Sprintf("%dMi", reqMem))); err != nil || again != got {
			t.Errorf("seed %d: asked again, %d (%v), want %d", seed, again, err, got)
		}
	}
}

func TestAnswerIsCapped(t *testing.T) {
	_, ctx := testutil.Context(t)
	e := estimatorFor(t, ctx, &snapshot.Snapshot{Nodes: nodes(4, "8", "16Gi")}, 7)
	got, err := e.MaxAvailableReplicas(ctx, "", request(t, "100m", "100Mi"))
	if err != nil || got != 7 {
		t.Errorf("got %d (%v), want the cap, 7", got, err)
	}
}

// The node claim, in the legacy fields and in their successors, keeps
// replicas to the nodes it allows.
func TestNodeClaimDecides(t *testing.T) {
	_, ctx := testutil.Context(t)
	all := nodes(6, "1", "1Gi") // room for 4 replicas of 250m each
	for i, n := range all {
		n.Labels["pool"] = []string{"a", "b"}[i%2]
		n.Labels["zone"] = []string{"x", "y", "z"}[i%3]
	}
	taint := v1.Taint{Key: "dedicated", Value: "batch", Effect: v1.TaintEffectNoSchedule}
	all[0].Spec.Taints = []v1.Taint{taint}
	e := estimatorFor(t, ctx, &snapshot.Snapshot{Nodes: all}, 1000)
	affinity := &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
		{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"x", "y"}}}}}}
	affinityBytes, err := affinity.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	toleration := v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "batch", Effect: v1.TaintEffectNoSchedule}
	tolerationBytes, err := toleration.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		claim *pb.NodeClaim
		want  int32 // nodes allowed × 4
	}{
		{"none: the tainted node is out", nil, 5 * 4},
		{"selector pool=a (node-0 tainted)", &pb.NodeClaim{NodeSelector: map[string]string{"pool": "a"}}, 2 * 4},
		{"selector and toleration", &pb.NodeClaim{NodeSelector: map[string]string{"pool": "a"}, TolerationsBytes: [][]byte{tolerationBytes}}, 3 * 4},
		{"legacy toleration", &pb.NodeClaim{NodeSelector: map[string]string{"pool": "a"}, Tolerations: [][]byte{tolerationBytes}}, 3 * 4},
		{"affinity zone in x, y (nodes 0, 1, 3, 4; 0 tainted)", &pb.NodeClaim{NodeAffinityBytes: affinityBytes}, 3 * 4},
		{"legacy affinity", &pb.NodeClaim{NodeAffinity: affinityBytes}, 3 * 4},
	} {
		req := request(t, "250m", "100Mi")
		req.ReplicaRequirements.NodeClaim = tc.claim
		got, err := e.MaxAvailableReplicas(ctx, "", req)
		if err != nil || got != tc.want {
			t.Errorf("%s: %d (%v), want %d", tc.name, got, err, tc.want)
		}
	}
	// The legacy resource field alone, as older clients send it.
	legacy := &pb.MaxAvailableReplicasRequest{ReplicaRequirements: &pb.ReplicaRequirements{
		ResourceRequest: quantities(t, v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")})}}
	if got, err := e.MaxAvailableReplicas(ctx, "", legacy); err != nil || got != 5*2 {
		t.Errorf("legacy resourceRequest: %d (%v), want %d", got, err, 5*2)
	}
}

func TestAssumedWorkloadsTakeRoomFirst(t *testing.T) {
	_, ctx := testutil.Context(t)
	e := estimatorFor(t, ctx, &snapshot.Snapshot{Nodes: nodes(2, "2", "4Gi")}, 1000)
	req := request(t, "500m", "100Mi") // 8 fit
	req.AssumedWorkloads = []*pb.AssumedWorkload{{Namespace: "other", Components: []*pb.Component{{
		Name: "main", Replicas: 3,
		ReplicaRequirements: &pb.ComponentReplicaRequirements{ResourceRequestBytes: quantities(t, v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")})},
	}}}}
	if got, err := e.MaxAvailableReplicas(ctx, "", req); err != nil || got != 5 {
		t.Errorf("%d (%v), want 5: three of 8 places are assumed taken", got, err)
	}
}

func TestComponentSetsFitWhole(t *testing.T) {
	_, ctx := testutil.Context(t)
	e := estimatorFor(t, ctx, &snapshot.Snapshot{Nodes: nodes(3, "4", "8Gi")}, 1000)
	component := func(name, cpu string, replicas int32) *pb.Component {
		return &pb.Component{Name: name, Replicas: replicas, ReplicaRequirements: &pb.ComponentReplicaRequirements{
			ResourceRequestBytes: quantities(t, v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)})}}
	}
	// A set: one 1-CPU manager and two 2-CPU workers, 5 CPUs; 12 CPUs in
	// 4-CPU nodes hold two sets (a third's workers find no node).
	req := &pb.MaxAvailableComponentSetsRequest{Namespace: "default", Components: []*pb.Component{
		component("manager", "1", 1), component("worker", "2", 2)}}
	if got, err := e.MaxAvailableComponentSets(ctx, req); err != nil || got != 2 {
		t.Errorf("%d sets (%v), want 2", got, err)
	}
}

func TestUnschedulableReplicasThatStillFitNowhere(t *testing.T) {
	_, ctx := testutil.Context(t)
	old := metav1.NewTime(time.Now().Add(-time.Hour))
	pending := func(i int, cpu string) *v1.Pod {
		p := deploymentPod("batch", "", i)
		p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse(cpu)
		p.Status = v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{{
			Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable, LastTransitionTime: old}}}
		return p
	}
	snap := &snapshot.Snapshot{Nodes: nodes(2, "2", "4Gi"), Pods: []*v1.Pod{
		deploymentPod("batch", "node-0", 0), pending(1, "3"), pending(2, "4"), pending(3, "1")}}
	e := estimatorFor(t, ctx, snap, 1000)
	ref := &pb.ObjectReference{ApiVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "batch"}
	if got, err := e.UnschedulableReplicas(ctx, ref, time.Minute); err != nil || got != 2 {
		t.Errorf("%d (%v), want 2: the 3- and 4-CPU pods fit no 2-CPU node, the 1-CPU one fits", got, err)
	}
	if got, err := e.UnschedulableReplicas(ctx, ref, 2*time.Hour); err != nil || got != 0 {
		t.Errorf("threshold 2h: %d (%v), want 0", got, err)
	}
}

// Trouble is answered -1, never an error: before the cluster is read, a
// request that does not decode, a scheduler not modelled, no time left.
func TestTroubleIsNoOpinion(t *testing.T) {
	logger, ctx := testutil.Context(t)
	notRead := NewServer(logger, newEstimator(Options{MaxReplicas: 10}, defaultProfiles(t), nil), time.Second, "", nil)
	if res, err := notRead.MaxAvailableReplicas(ctx, request(t, "1", "1Gi")); err != nil || res.GetMaxReplicas() != NoOpinion {
		t.Errorf("before the cluster is read: %d (%v), want -1", res.GetMaxReplicas(), err)
	}
	e := estimatorFor(t, ctx, &snapshot.Snapshot{Nodes: nodes(2, "2", "4Gi")}, 1000)
	srv := NewServer(logger, e, time.Second, "", nil)
	bad := request(t, "1", "1Gi")
	bad.ReplicaRequirements.ResourceRequestBytes["cpu"] = []byte{0xff}
	if res, err := srv.MaxAvailableReplicas(ctx, bad); err != nil || res.GetMaxReplicas() != NoOpinion {
		t.Errorf("a quantity that does not decode: %d (%v), want -1", res.GetMaxReplicas(), err)
	}
	if _, err := e.MaxAvailableReplicas(ctx, "", bad); err == nil || !strings.Contains(err.Error(), "replicaRequirements.resourceRequestBytes[cpu]") {
		t.Errorf("the error names the field: %v", err)
	}
	late := NewServer(logger, e, time.Nanosecond, "", nil)
	if res, err := late.MaxAvailableReplicas(ctx, request(t, "1", "1Gi")); err != nil || res.GetMaxReplicas() != NoOpinion {
		t.Errorf("past the budget: %d (%v), want -1", res.GetMaxReplicas(), err)
	}
	if res, err := srv.MaxAvailableReplicas(ctx, request(t, "1", "1Gi")); err != nil || res.GetMaxReplicas() != 4 {
		t.Errorf("after the trouble: %d (%v), want 4", res.GetMaxReplicas(), err)
	}
	other := newEstimator(Options{MaxReplicas: 10, SchedulerName: "elsewhere"}, defaultProfiles(t), nil)
	if err := other.Update(ctx, &snapshot.Snapshot{Nodes: nodes(2, "2", "4Gi")}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.MaxAvailableReplicas(ctx, "", request(t, "1", "1Gi")); err == nil {
		t.Error("replicas of a scheduler not modelled: no error")
	}
}

// A question about another cluster than --cluster-name is refused with an
// error, each method alike, as Karmada's own estimator refuses it; the
// cluster's own questions are answered.
func TestQuestionsAboutAnotherClusterAreRefused(t *testing.T) {
	logger, ctx := testutil.Context(t)
	e := estimatorFor(t, ctx, &snapshot.Snapshot{Nodes: nodes(2, "2", "4Gi")}, 1000)
	srv := NewServer(logger, e, time.Second, "member", nil)
	if res, err := srv.MaxAvailableReplicas(ctx, request(t, "1", "1Gi")); err != nil || res.GetMaxReplicas() != 4 {
		t.Errorf("this cluster's question: %d (%v), want 4", res.GetMaxReplicas(), err)
	}
	for _, asked := range []string{"member-that-is-not-this-one", ""} {
		req := request(t, "1", "1Gi")
		req.Cluster = asked
		errs := map[string]error{}
		_, errs["MaxAvailableReplicas"] = srv.MaxAvailableReplicas(ctx, req)
		_, errs["MaxAvailableComponentSets"] = srv.MaxAvailableComponentSets(ctx, &pb.MaxAvailableComponentSetsRequest{Cluster: asked})
		_, errs["GetUnschedulableReplicas"] = srv.GetUnschedulableReplicas(ctx, &pb.UnschedulableReplicasRequest{Cluster: asked})
		for method, err := range errs {
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), fmt.Sprintf("asked about %q", asked)) {
				t.Errorf("%s about %q: %v, want InvalidArgument naming the cluster asked about", method, asked, err)
			}
		}
	}
	anyCluster := NewServer(logger, e, time.Second, "", nil)
	req := request(t, "1", "1Gi")
	req.Cluster = "elsewhere"
	if res, err := anyCluster.MaxAvailableReplicas(ctx, req); err != nil || res.GetMaxReplicas() != 4 {
		t.Errorf("without a cluster name: %d (%v), want 4", res.GetMaxReplicas(), err)
	}
}

func TestParseObject(t *testing.T) {
	for in, want := range map[string]workload{
		"kind=Deployment, name=ns/web": {kind: "Deployment", namespace: "ns", name: "web"},
		"kind=StatefulSet,name=a/b":    {kind: "StatefulSet", namespace: "a", name: "b"},
	} {
		if got, ok := parseObject(in); !ok || got != want {
			t.Errorf("%q: %v %v, want %v", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "web", "kind=Deployment"} {
		if _, ok := parseObject(in); ok {
			t.Errorf("%q parsed", in)
		}
	}
}

// A workload the cluster has but runs no pod of (scaled to zero, or just
// propagated) is estimated from its pod template.
func TestWorkloadsTemplateBeforeItsPods(t *testing.T) {
	_, ctx := testutil.Context(t)
	spec := testutil.BuildTestPod("x", "", "100m", "100Mi", antiAffinity("api")).Spec
	client := fake.NewClientset(&appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Template: v1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "api"}}, Spec: spec}},
	})
	e := newEstimator(Options{MaxReplicas: 1000, Templates: startedTemplates(t, ctx, client)}, defaultProfiles(t), nil)
	if err := e.Update(ctx, &snapshot.Snapshot{Nodes: nodes(6, "8", "16Gi")}); err != nil {
		t.Fatal(err)
	}
	if got, err := e.MaxAvailableReplicas(ctx, "kind=Deployment, name=default/api", request(t, "100m", "100Mi")); err != nil || got != 6 {
		t.Errorf("%d (%v), want 6: one per node, by the template's anti-affinity", got, err)
	}
	// A workload the cluster does not have: the request's replicas.
	if got, err := e.MaxAvailableReplicas(ctx, "kind=Deployment, name=default/other", request(t, "100m", "100Mi")); err != nil || got != 480 {
		t.Errorf("unknown workload: %d (%v), want 480 (80 per node)", got, err)
	}
}

// With the policy of the cluster's rebalancer, a pending pod that its
// MakeRoom moves make room for is not counted unschedulable; one they
// cannot is.
func TestRoomMadeByThePolicyIsNotUnschedulable(t *testing.T) {
	_, ctx := testutil.Context(t)
	_, prof, err := profile.Load("../../policies/binpacking-scheduler.yaml", "rebalancer-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(`apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: room
  pluginConfig:
  - name: DefaultEvictor
  - name: MakeRoom
    args:
      unschedulableFor: 1m
  plugins:
    balance:
      enabled: [MakeRoom]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Load(path, fake.NewClientset(), policy.Registry())
	if err != nil {
		t.Fatal(err)
	}
	old := metav1.NewTime(time.Now().Add(-time.Hour))
	// 2 and 3 CPUs free: a 4-CPU pod fits once one pod moves off node-1; a
	// 6-CPU pod fits no node, however the pods move.
	cluster := func(scheduler string) *snapshot.Snapshot {
		named := testutil.WithScheduler(scheduler)
		small := func(name, node string, i int) *v1.Pod {
			p := deploymentPod(name, node, i, named)
			p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("1")
			return p
		}
		pending := func(name, cpu string) *v1.Pod {
			p := deploymentPod(name, "", 9, named)
			p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse(cpu)
			p.Status = v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{{
				Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable, LastTransitionTime: old}}}
			return p
		}
		return &snapshot.Snapshot{Nodes: nodes(2, "4", "16Gi"), Pods: []*v1.Pod{
			small("a", "node-0", 0), small("a", "node-0", 1), small("b", "node-1", 0),
			pending("big", "4"), pending("huge", "6")}}
	}
	// rebalancer's extender steers default-scheduler's replacements as the
	// session models it for a plan: its moves then make room too.
	extender := []profile.Extender{{Extender: config.Extender{URLPrefix: "http://extender.invalid", Weight: 5}, Schedulers: []string{v1.DefaultSchedulerName}}}
	for _, tc := range []struct {
		profiles  []*config.KubeSchedulerProfile
		scheduler string
		extenders []profile.Extender
		policy    *api.DeschedulerPolicy
		big, huge int32
		what      string
	}{
		{[]*config.KubeSchedulerProfile{prof}, "rebalancer-scheduler", nil, nil, 1, 1, "without the policy"},
		{[]*config.KubeSchedulerProfile{prof}, "rebalancer-scheduler", nil, pol, 0, 1, "with MakeRoom"},
		{defaultProfiles(t), v1.DefaultSchedulerName, nil, pol, 1, 1, "with MakeRoom, default-scheduler unsteered"},
		{defaultProfiles(t), v1.DefaultSchedulerName, extender, pol, 0, 1, "with MakeRoom, default-scheduler steered by the extender"},
	} {
		e := New(Options{MaxReplicas: 100}, session.New(session.Options{}), &inputs.Inputs{Schedulers: tc.profiles, Extenders: tc.extenders, Policy: tc.policy})
		if err := e.Update(ctx, cluster(tc.scheduler)); err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]int32{"big": tc.big, "huge": tc.huge} {
			got, err := e.UnschedulableReplicas(ctx, &pb.ObjectReference{Kind: "Deployment", Namespace: "default", Name: name}, time.Minute)
			if err != nil || got != want {
				t.Errorf("%s, %s: %d unschedulable (%v), want %d", tc.what, name, got, err, want)
			}
		}
	}
}

// The pods of the namespaces rebalancer's webhook opts in are given
// rebalancer-scheduler, in the session's simulation as by the webhook: a
// workload of such a namespace whose pods name default-scheduler is
// answered as rebalancer-scheduler's, as if its pods named it, and not
// answered where only rebalancer-scheduler is modelled and nothing opts it
// in.
func TestOptedInReplicasArePlacedByTheWebhooksScheduler(t *testing.T) {
	_, ctx := testutil.Context(t)
	_, prof, err := profile.Load("../../policies/binpacking-scheduler.yaml", "rebalancer-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	cluster := func(scheduler string) *snapshot.Snapshot {
		pod := deploymentPod("web", "node-0", 0, testutil.WithScheduler(scheduler))
		pod.Namespace = "team"
		return &snapshot.Snapshot{Nodes: nodes(2, "4", "8Gi"), Pods: []*v1.Pod{pod},
			Namespaces: []*v1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "team", Labels: map[string]string{"opt": "in"}}}}}
	}
	in := &inputs.Inputs{Schedulers: []*config.KubeSchedulerProfile{prof}}
	answer := func(s *session.Session, snap *snapshot.Snapshot) (int32, error) {
		e := New(Options{MaxReplicas: 1000}, s, in)
		if err := e.Update(ctx, snap); err != nil {
			t.Fatal(err)
		}
		return e.MaxAvailableReplicas(ctx, "kind=Deployment, name=team/web", request(t, "100m", "100Mi"))
	}
	want, err := answer(session.New(session.Options{}), cluster("rebalancer-scheduler"))
	if err != nil || want <= 0 {
		t.Fatalf("naming rebalancer-scheduler: %d (%v), want some", want, err)
	}
	optIn := session.New(session.Options{OptIn: labels.SelectorFromSet(labels.Set{"opt": "in"}), OptInFrom: "--opt-in-namespaces opt=in"})
	if got, err := answer(optIn, cluster(v1.DefaultSchedulerName)); err != nil || got != want {
		t.Errorf("opted in: %d (%v), want %d, as naming rebalancer-scheduler", got, err, want)
	}
	if got, err := answer(session.New(session.Options{}), cluster(v1.DefaultSchedulerName)); err == nil {
		t.Errorf("not opted in: %d, want an error: default-scheduler is not modelled", got)
	}
}

// Each Update lets the simulation it replaces go: its informers stop, so a
// long-lived estimator re-reading the cluster does not pile them up.
func TestUpdatesLetTheOldSimulationGo(t *testing.T) {
	_, ctx := testutil.Context(t)
	e := newEstimator(Options{MaxReplicas: 10}, defaultProfiles(t), nil)
	snap := &snapshot.Snapshot{Nodes: nodes(3, "4", "8Gi")}
	if err := e.Update(ctx, snap); err != nil {
		t.Fatal(err)
	}
	after1 := runtime.NumGoroutine()
	for range 10 {
		if err := e.Update(ctx, snap); err != nil {
			t.Fatal(err)
		}
	}
	// The stopped informers' goroutines end on their own time.
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return runtime.NumGoroutine() <= after1+2, nil
	})
	if err != nil {
		t.Errorf("%d goroutines after 11 updates, %d after the first: the replaced simulations still run", runtime.NumGoroutine(), after1)
	}
}

// Replicas that claim a GPU through DRA, from their Job's claim template,
// fit once per free device: one, gpu-b's, then two once gpu-a publishes a
// second GPU; their CPU and memory alone fit dozens.
func TestDevicesBoundTheAnswer(t *testing.T) {
	_, ctx := testutil.Context(t)
	profiles, _, err := profile.Schedulers([]string{"../../policies/binpacking-scheduler.yaml"}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, extraGPU := range []bool{false, true} {
		snap, err := snapshot.Load("../../test/testdata/dra-snapshot.yaml")
		if err != nil {
			t.Fatal(err)
		}
		want := int32(1)
		if extraGPU {
			want = 2
			for _, sl := range snap.ResourceSlices {
				if sl.Spec.NodeName != nil && *sl.Spec.NodeName == "gpu-a" {
					extra := sl.Spec.Devices[0]
					extra.Name = "gpu-1"
					sl.Spec.Devices = append(sl.Spec.Devices, extra)
				}
			}
		}
		e := newEstimator(Options{MaxReplicas: 100}, profiles, nil)
		if err := e.Update(ctx, snap); err != nil {
			t.Fatal(err)
		}
		if got, err := e.MaxAvailableReplicas(ctx, "kind=Job, name=ml/trainer", request(t, "1", "4Gi")); err != nil || got != want {
			t.Errorf("second GPU on gpu-a %v: %d replicas (%v), want %d", extraGPU, got, err, want)
		}
		if got, err := e.MaxAvailableReplicas(ctx, "", request(t, "1", "4Gi")); err != nil || got <= want {
			t.Errorf("second GPU on gpu-a %v: from the requests alone %d (%v), want more than %d", extraGPU, got, err, want)
		}
	}
}

// A profile that places by usage (LoadAware) sees a node's usage over the
// session's usage window, as a plan does: a spike shorter than the window
// (the newest sample hot, one 30s before cool) does not keep the replicas
// off the node; the newest sample alone does.
func TestUsageCountsOverTheSessionsWindow(t *testing.T) {
	_, ctx := testutil.Context(t)
	_, prof, err := profile.Load("../../policies/load-aware-scheduler.yaml", "rebalancer-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	sample := func(cpu string, ago time.Duration) *metricsv1beta1.NodeMetrics {
		return &metricsv1beta1.NodeMetrics{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}, Timestamp: metav1.NewTime(at.Add(-ago)),
			Usage: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("1Gi")}}
	}
	// 3.5 of 4 CPUs now, over LoadAware's 70%; 0.3 thirty seconds before.
	snap := &snapshot.Snapshot{Nodes: nodes(1, "4", "8Gi"), NodeMetrics: []*metricsv1beta1.NodeMetrics{sample("3500m", 0), sample("300m", 30*time.Second)}}
	in := &inputs.Inputs{Schedulers: []*config.KubeSchedulerProfile{prof}}
	req := request(t, "100m", "100Mi")
	for _, tc := range []struct {
		window time.Duration
		fit    bool
	}{{0, false}, {10 * time.Second, false}, {time.Minute, true}} {
		e := New(Options{MaxReplicas: 10, SchedulerName: "rebalancer-scheduler"}, session.New(session.Options{UsageWindow: tc.window}), in)
		if err := e.Update(ctx, snap); err != nil {
			t.Fatal(err)
		}
		got, err := e.MaxAvailableReplicas(ctx, "", req)
		if err != nil || (got > 0) != tc.fit {
			t.Errorf("window %s: %d replicas (%v), want some: %t", tc.window, got, err, tc.fit)
		}
	}
}

// Questions asked at once, answered on two simulations in parallel, get
// the answers one simulation gives them one at a time: replicas of a
// request, a Deployment's kept apart by anti-affinity or spread over the
// zones (counted in closed form), and ones placed one by one after
// assumed workloads.
func TestParallelAnswersAgreeWithSerialOnes(t *testing.T) {
	_, ctx := testutil.Context(t)
	ns := nodes(12, "4", "8Gi")
	for i, n := range ns {
		n.Labels[v1.LabelTopologyZone] = []string{"a", "b", "c"}[i%3]
	}
	spread := func(p *v1.Pod) {
		p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone,
			WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}}}
	}
	snap := &snapshot.Snapshot{Nodes: ns, Pods: []*v1.Pod{
		deploymentPod("web", "node-0", 0, antiAffinity("web")),
		deploymentPod("api", "node-1", 0, spread), deploymentPod("api", "node-4", 1, spread),
	}}
	assumed := request(t, "250m", "256Mi")
	assumed.AssumedWorkloads = []*pb.AssumedWorkload{{Namespace: "default", Components: []*pb.Component{{Name: "a", Replicas: 9,
		ReplicaRequirements: &pb.ComponentReplicaRequirements{ResourceRequestBytes: quantities(t, v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("1500m"), v1.ResourceMemory: resource.MustParse("1Gi")})}}}}}
	type question struct {
		object string
		req    *pb.MaxAvailableReplicasRequest
	}
	var questions []question
	for _, size := range [][2]string{{"100m", "128Mi"}, {"1", "1Gi"}, {"3", "6Gi"}} {
		questions = append(questions, question{"", request(t, size[0], size[1])},
			question{"kind=Deployment, name=default/web", request(t, size[0], size[1])},
			question{"kind=Deployment, name=default/api", request(t, size[0], size[1])})
	}
	questions = append(questions, question{"", assumed}, question{"kind=Deployment, name=default/api", assumed})
	serial := estimatorFor(t, ctx, snap, 1000)
	want := make([]int32, len(questions))
	for i, q := range questions {
		n, err := serial.MaxAvailableReplicas(ctx, q.object, q.req)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = n
	}
	e := newEstimator(Options{MaxReplicas: 1000, Workers: 2}, defaultProfiles(t), nil)
	if err := e.Update(ctx, snap); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([]int32, 8*len(questions))
	errs := make([]error, len(got))
	for c := range 8 {
		wg.Go(func() {
			for i, q := range questions {
				got[c*len(questions)+i], errs[c*len(questions)+i] = e.MaxAvailableReplicas(ctx, q.object, q.req)
			}
		})
	}
	wg.Wait()
	for k, n := range got {
		if i := k % len(questions); errs[k] != nil || n != want[i] {
			t.Errorf("question %d (%q), caller %d: %d (%v), one at a time %d", i, questions[i].object, k/len(questions), n, errs[k], want[i])
		}
	}
}

// An answer still being worked out when the budget ends is answered -1
// then, not when the work ends.
func TestAnswerGivenAtTheBudget(t *testing.T) {
	logger, ctx := testutil.Context(t)
	srv := NewServer(logger, newEstimator(Options{MaxReplicas: 10}, defaultProfiles(t), nil), 50*time.Millisecond, "", nil)
	release := make(chan struct{})
	defer close(release)
	start := time.Now()
	n := srv.answer(ctx, "MaxAvailableReplicas", "", func(context.Context) (int32, string, error) {
		<-release // a cycle that does not look at its context
		return 5, "", nil
	})
	if elapsed := time.Since(start); n != NoOpinion || elapsed > time.Second {
		t.Errorf("answered %d after %s, want -1 at the budget of 50ms", n, elapsed)
	}
}
