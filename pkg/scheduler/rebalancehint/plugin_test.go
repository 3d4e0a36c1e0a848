package rebalancehint

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/rebalancer-dev/rebalancer/internal/fakewatch"
	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

const (
	fitWeight  = 5
	hintWeight = 50
)

var (
	t0     = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	web    = testutil.ControllerRef("ReplicaSet", "web-1", "uid-web")
	api    = testutil.ControllerRef("ReplicaSet", "api-1", "uid-api")
	toNode = hint.Hint{Source: "full", Target: "half", PlanID: "plan-1", Time: t0}
)

// node is a node of cpu CPUs and 32Gi without the hostname label and Ready
// condition testutil.BuildTestNode gives.
func node(name string, cpu string) *v1.Node {
	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("32Gi"), v1.ResourcePods: resource.MustParse("110")}
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Capacity: rl, Allocatable: rl}}
}

// pod is a pod of cpu CPUs and 1Gi, owned by owner unless nil.
func pod(name, nodeName, cpu string, owner *metav1.OwnerReference) *v1.Pod {
	p := testutil.BuildTestPod(name, nodeName, cpu, "1Gi")
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return p
}

func hinted(p *v1.Pod, h hint.Hint) *v1.Pod {
	p.Annotations = h.Annotations()
	return p
}

// cluster: "full" is the most allocated node, so MostAllocated prefers it;
// "half" and "empty" have room.
func cluster() ([]*v1.Node, []*v1.Pod) {
	nodes := []*v1.Node{node("full", "8"), node("half", "8"), node("empty", "8")}
	pods := []*v1.Pod{pod("a", "full", "6", &api), pod("b", "half", "3", &api)}
	return nodes, pods
}

type env struct {
	pods   toolscache.SharedIndexInformer
	pl     *Plugin
	clock  *testingclock.FakeClock
	client *fake.Clientset
	ctx    context.Context
}

func newEnv(t testing.TB, rawArgs string) *env {
	return newEnvWith(t, rawArgs, nil, nil)
}

// newEnvWith builds the plugin as New does, with arrivals, over the
// factory wrap returns (nil: the factory itself).
func newEnvWith(t testing.TB, rawArgs string, wrap func(informers.SharedInformerFactory) informers.SharedInformerFactory, arrivals *hint.Arrivals) *env {
	_, ctx := testutil.Context(t)
	client := fake.NewClientset()
	watching := fakewatch.Started(client, "pods")
	factory := informers.NewSharedInformerFactory(client, 0)
	seen := factory
	if wrap != nil {
		seen = wrap(factory)
	}
	h, err := frameworkruntime.NewFramework(ctx, nil, nil, frameworkruntime.WithInformerFactory(seen))
	if err != nil {
		t.Fatal(err)
	}
	c := testingclock.NewFakeClock(t0)
	var obj runtime.Object
	if rawArgs != "" {
		obj = &runtime.Unknown{Raw: []byte(rawArgs), ContentType: runtime.ContentTypeJSON}
	}
	pl, err := newPlugin(ctx, obj, h, c, arrivals)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	<-watching
	return &env{pl: pl, clock: c, client: client, ctx: ctx, pods: factory.Core().V1().Pods().Informer()}
}

// schedule runs one scheduling cycle of a profile made of NodeResourcesFit
// (MostAllocated) and the plugin under test, as kube-scheduler would: Filter,
// PreScore, Score, pick the best node (ties by name), Reserve.
func (e *env) schedule(t *testing.T, nodes []*v1.Node, pods []*v1.Pod, p *v1.Pod) string {
	t.Helper()
	snapshot := cache.NewSnapshot(pods, nodes)
	e.pl.nodes = snapshot // as the scheduler's handle has it
	fit := func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return noderesources.NewFit(ctx, &config.NodeResourcesFitArgs{ScoringStrategy: &config.ScoringStrategy{
			Type:      config.MostAllocated,
			Resources: []config.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}},
		}}, h, feature.Features{})
	}
	self := func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) { return e.pl, nil }
	f, err := tf.NewFramework(e.ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
		tf.RegisterPluginAsExtensionsWithWeight(noderesources.Name, fitWeight, fit, "PreFilter", "Filter", "PreScore", "Score"),
		tf.RegisterPluginAsExtensionsWithWeight(Name, hintWeight, self, "PreFilter", "Filter", "PreScore", "Score", "Reserve"),
	}, "rebalancer-scheduler", frameworkruntime.WithSnapshotSharedLister(snapshot))
	if err != nil {
		t.Fatal(err)
	}
	state := framework.NewCycleState()
	if _, s, _ := f.RunPreFilterPlugins(e.ctx, state, p); !s.IsSuccess() {
		t.Fatalf("PreFilter: %v", s)
	}
	all, _ := snapshot.NodeInfos().List()
	var feasible []fwk.NodeInfo
	for _, ni := range all {
		if s := f.RunFilterPlugins(e.ctx, state, p, ni); s.IsSuccess() {
			feasible = append(feasible, ni)
		}
	}
	if len(feasible) == 0 {
		return ""
	}
	if s := f.RunPreScorePlugins(e.ctx, state, p, feasible); !s.IsSuccess() {
		t.Fatalf("PreScore: %v", s)
	}
	scores, s := f.RunScorePlugins(e.ctx, state, p, feasible)
	if !s.IsSuccess() {
		t.Fatalf("Score: %v", s)
	}
	sort.Slice(scores, func(i, j int) bool {
		if scores[i].TotalScore != scores[j].TotalScore {
			return scores[i].TotalScore > scores[j].TotalScore
		}
		return scores[i].Name < scores[j].Name
	})
	best := scores[0].Name
	if s := f.RunReservePluginsReserve(e.ctx, state, p, best); !s.IsSuccess() {
		t.Fatalf("Reserve: %v", s)
	}
	return best
}

func TestWithoutHintProfileDecides(t *testing.T) {
	e := newEnv(t, "")
	nodes, pods := cluster()
	if got := e.schedule(t, nodes, pods, pod("new", "", "1", &web)); got != "full" {
		t.Fatalf("MostAllocated without a hint placed the pod on %q, want the fullest node %q", got, "full")
	}
}

func TestHintSteersReplacementToTarget(t *testing.T) {
	e := newEnv(t, "")
	nodes, pods := cluster()
	e.pl.PodLeaving(klogger(t), hinted(pod("old", "full", "1", &web), toNode))
	if got := e.schedule(t, nodes, pods, pod("new", "", "1", &web)); got != "half" {
		t.Fatalf("replacement placed on %q, want hinted target %q", got, "half")
	}
	// The hint is consumed: the owner's next pod is scored by the profile alone.
	if got := e.schedule(t, nodes, pods, pod("new2", "", "1", &web)); got != "full" {
		t.Fatalf("second pod placed on %q, want %q (hint already used)", got, "full")
	}
}

func TestOtherOwnerIsNotSteered(t *testing.T) {
	e := newEnv(t, "")
	nodes, pods := cluster()
	e.pl.PodLeaving(klogger(t), hinted(pod("old", "full", "1", &web), toNode))
	if got := e.schedule(t, nodes, pods, pod("other", "", "1", &api)); got != "full" {
		t.Fatalf("pod of another owner placed on %q, want %q", got, "full")
	}
	if got := e.schedule(t, nodes, pods, pod("bare", "", "1", nil)); got != "full" {
		t.Fatalf("bare pod placed on %q, want %q", got, "full")
	}
	// The hint is still there for its own owner.
	if got := e.schedule(t, nodes, pods, pod("new", "", "1", &web)); got != "half" {
		t.Fatalf("replacement placed on %q, want %q", got, "half")
	}
}

func TestHintExpires(t *testing.T) {
	e := newEnv(t, `{"hintTTL":"2m"}`)
	nodes, pods := cluster()
	e.pl.PodLeaving(klogger(t), hinted(pod("old", "full", "1", &web), toNode))
	e.clock.Step(2*time.Minute + time.Second)
	if got := e.schedule(t, nodes, pods, pod("new", "", "1", &web)); got != "full" {
		t.Fatalf("after expiry the pod went to %q, want %q", got, "full")
	}
	if n := e.pl.book.Len(); n != 0 {
		t.Fatalf("book holds %d expired entries", n)
	}
}

func TestStaleHintIgnored(t *testing.T) {
	e := newEnv(t, `{"hintTTL":"1m"}`)
	nodes, pods := cluster()
	old := toNode
	old.Time = t0.Add(-time.Hour) // the eviction failed an hour ago; the pod leaves now for another reason
	e.pl.PodLeaving(klogger(t), hinted(pod("old", "full", "1", &web), old))
	if got := e.schedule(t, nodes, pods, pod("new", "", "1", &web)); got != "full" {
		t.Fatalf("stale hint steered the pod to %q", got)
	}
}

func TestTargetThatNoLongerFitsLosesToFilter(t *testing.T) {
	e := newEnv(t, "")
	nodes, pods := cluster()
	pods = append(pods, pod("filler", "half", "5", &api)) // "half" is now full
	e.pl.PodLeaving(klogger(t), hinted(pod("old", "full", "1", &web), toNode))
	got := e.schedule(t, nodes, pods, pod("new", "", "2", &web))
	if got == "half" {
		t.Fatal("pod placed on a target that does not fit")
	}
	if got == "full" {
		t.Fatal("pod placed back on its source node")
	}
	if got != "empty" {
		t.Fatalf("pod placed on %q, want %q", got, "empty")
	}
}

func TestMalformedHintIgnored(t *testing.T) {
	e := newEnv(t, "")
	nodes, pods := cluster()
	bad := pod("old", "full", "1", &web)
	bad.Annotations = map[string]string{wellknown.TargetNodeAnnotation: "half", wellknown.TimeAnnotation: "not-a-time"}
	e.pl.PodLeaving(klogger(t), bad)
	if n := e.pl.book.Len(); n != 0 {
		t.Fatalf("malformed hint recorded (%d entries)", n)
	}
	if got := e.schedule(t, nodes, pods, pod("new", "", "1", &web)); got != "full" {
		t.Fatalf("pod placed on %q, want %q", got, "full")
	}
}

func TestUnreserveGivesHintBack(t *testing.T) {
	e := newEnv(t, "")
	e.pl.PodLeaving(klogger(t), hinted(pod("old", "full", "1", &web), toNode))
	state := framework.NewCycleState()
	p := pod("new", "", "1", &web)
	if s := e.pl.PreScore(e.ctx, state, p, nil); !s.IsSuccess() {
		t.Fatalf("PreScore: %v", s)
	}
	e.pl.Reserve(e.ctx, state, p, "half")
	if _, ok := e.pl.book.Next(web.UID); ok {
		t.Fatal("hint still pending after Reserve")
	}
	e.pl.Unreserve(e.ctx, state, p, "half")
	if _, ok := e.pl.book.Next(web.UID); !ok {
		t.Fatal("hint not given back by Unreserve")
	}
	// Unreserve without Reserve (allowed by the framework) changes nothing.
	e.pl.Unreserve(e.ctx, framework.NewCycleState(), p, "half")
	if _, ok := e.pl.book.Next(web.UID); !ok {
		t.Fatal("Unreserve without a reservation dropped the hint")
	}
}

func TestSignPodRefusesPodsWithPendingHint(t *testing.T) {
	e := newEnv(t, "")
	if _, s := e.pl.SignPod(e.ctx, pod("new", "", "1", &web)); !s.IsSuccess() {
		t.Fatalf("SignPod without hint: %v", s)
	}
	e.pl.PodLeaving(klogger(t), hinted(pod("old", "full", "1", &web), toNode))
	if _, s := e.pl.SignPod(e.ctx, pod("new", "", "1", &web)); s.Code() != fwk.Unschedulable {
		t.Fatalf("SignPod with a pending hint = %v, want Unschedulable", s)
	}
}

// TestInformerRecordsTerminatingAndDeletedPods drives the real informer path:
// a pod marked for deletion (graceful termination) and a pod deleted outright.
func TestInformerRecordsTerminatingAndDeletedPods(t *testing.T) {
	e := newEnv(t, "")
	pods := e.client.CoreV1().Pods("default")
	graceful := hinted(pod("graceful", "full", "1", &web), toNode)
	abrupt := hinted(pod("abrupt", "full", "1", &api), toNode)
	for _, p := range []*v1.Pod{graceful, abrupt} {
		if _, err := pods.Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	terminating := graceful.DeepCopy()
	terminating.DeletionTimestamp = &metav1.Time{Time: t0}
	if _, err := pods.Update(e.ctx, terminating, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(e.ctx, abrupt.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The delete that follows the graceful termination must not record it twice.
	if err := pods.Delete(e.ctx, graceful.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, okWeb := e.pl.book.Next(web.UID)
		_, okAPI := e.pl.book.Next(api.UID)
		return okWeb && okAPI, nil
	})
	if err != nil {
		t.Fatalf("hints not recorded from informer events: %v", err)
	}
	if n := e.pl.book.Len(); n != 2 {
		t.Fatalf("book holds %d entries, want 2", n)
	}
}

func TestArgs(t *testing.T) {
	cases := []struct {
		raw     string
		wantTTL time.Duration
		wantErr string
	}{
		{raw: ``, wantTTL: DefaultHintTTL},
		{raw: `{}`, wantTTL: DefaultHintTTL},
		{raw: `{"hintTTL":"90s"}`, wantTTL: 90 * time.Second},
		{raw: `{"apiVersion":"kubescheduler.config.k8s.io/v1","kind":"RebalanceHintArgs","hintTTL":"1m"}`, wantTTL: time.Minute},
		{raw: `{"hintTtl":"1m"}`, wantErr: `unknown field "hintTtl"`},
		{raw: `{"hintTTL":"1m","hintTTL":"2m"}`, wantErr: `key "hintTTL" already set`},
		{raw: `{"hintTTL":"-1m"}`, wantErr: `pluginConfig[RebalanceHint].args.hintTTL: Invalid value: "-1m0s": must be between 1s and 24h0m0s`},
		{raw: `{"hintTTL":"48h"}`, wantErr: `pluginConfig[RebalanceHint].args.hintTTL: Invalid value: "48h0m0s": must be between 1s and 24h0m0s`},
		{raw: `{"hintTTL":"soon"}`, wantErr: "pluginConfig[RebalanceHint].args"},
		{raw: `{"hintTTL":5}`, wantErr: "pluginConfig[RebalanceHint].args"},
	}
	for _, tc := range cases {
		t.Run(tc.raw, func(t *testing.T) {
			var obj runtime.Object
			if tc.raw != "" {
				obj = &runtime.Unknown{Raw: []byte(tc.raw)}
			}
			args, err := argsCodec.Decode(obj)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if args.HintTTL.Duration != tc.wantTTL {
				t.Fatalf("hintTTL = %s, want %s", args.HintTTL.Duration, tc.wantTTL)
			}
		})
	}
	if _, err := argsCodec.Decode(&config.NodeResourcesFitArgs{}); err == nil {
		t.Fatal("args of another plugin's type accepted")
	}
}

func klogger(t *testing.T) klog.Logger {
	logger, _ := ktesting.NewTestContext(t)
	return logger
}

func TestMain(m *testing.M) {
	// The framework records per-plugin metrics; kube-scheduler registers them at start.
	metrics.Register()
	os.Exit(m.Run())
}

func sticky(p *v1.Pod) *v1.Pod {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[wellknown.StickyAnnotation] = "true"
	return p
}

// TestStickyPodReturnsToItsNode: a sticky pod that leaves without a hint
// (a crash, a rollout, a manual delete) has its replacement scored back
// onto its node, although the profile prefers another; a pod that is not
// sticky is placed by the profile.
func TestStickyPodReturnsToItsNode(t *testing.T) {
	e := newEnv(t, "")
	nodes, pods := cluster()
	e.pl.PodLeaving(klogger(t), sticky(pod("old", "half", "1", &web)))
	if got := e.schedule(t, nodes, pods, sticky(pod("new", "", "1", &web))); got != "half" {
		t.Fatalf("sticky pod's replacement placed on %q, want its node %q", got, "half")
	}
	if got := e.schedule(t, nodes, pods, sticky(pod("new2", "", "1", &web))); got != "full" {
		t.Fatalf("second pod placed on %q, want %q (the node was taken back once)", got, "full")
	}

	control := newEnv(t, "")
	control.pl.PodLeaving(klogger(t), pod("old", "half", "1", &web))
	if got := control.schedule(t, nodes, pods, pod("new", "", "1", &web)); got != "full" {
		t.Fatalf("a pod that is not sticky was placed on %q, want the profile's %q", got, "full")
	}
	for _, value := range []string{"false", "yes", ""} {
		p := pod("old", "half", "1", &web)
		p.Annotations = map[string]string{wellknown.StickyAnnotation: value}
		if control.pl.book.Leaving(klogger(t), p) {
			t.Errorf("%s=%q recorded as sticky", wellknown.StickyAnnotation, value)
		}
	}
}

// TestRebalanceHintWinsOverSticky: a sticky pod that leaves with a
// rebalance hint (a deschedule plugin moved it) goes where the plan says,
// not back; and when an owner has both, its next pod takes the plan's.
func TestRebalanceHintWinsOverSticky(t *testing.T) {
	e := newEnv(t, "")
	nodes, pods := cluster()
	e.pl.PodLeaving(klogger(t), sticky(hinted(pod("old", "full", "1", &web), toNode)))
	if got := e.schedule(t, nodes, pods, sticky(pod("new", "", "1", &web))); got != "half" {
		t.Fatalf("a sticky pod moved by the plan was placed on %q, want the planned %q", got, "half")
	}

	e = newEnv(t, "")
	e.pl.PodLeaving(klogger(t), sticky(pod("crashed", "empty", "1", &web)))
	e.pl.PodLeaving(klogger(t), sticky(hinted(pod("moved", "full", "1", &web), toNode)))
	for i, want := range []string{"half", "empty", "full"} {
		if got := e.schedule(t, nodes, pods, sticky(pod(fmt.Sprintf("new-%d", i), "", "1", &web))); got != want {
			t.Errorf("replacement %d placed on %q, want %q (the plan's hint, then the sticky node, then the profile's)", i, got, want)
		}
	}

	// A stale hint: the eviction failed, the pod left later for another
	// reason; it is sticky, so it returns.
	e = newEnv(t, `{"hintTTL":"1m"}`)
	old := toNode
	old.Time = t0.Add(-time.Hour)
	e.pl.PodLeaving(klogger(t), sticky(hinted(pod("old", "empty", "1", &web), old)))
	if got := e.schedule(t, nodes, pods, sticky(pod("new", "", "1", &web))); got != "empty" {
		t.Fatalf("sticky pod with a stale hint placed on %q, want its node %q", got, "empty")
	}
}

func TestStickyExpires(t *testing.T) {
	e := newEnv(t, `{"hintTTL":"2m"}`)
	nodes, pods := cluster()
	e.pl.PodLeaving(klogger(t), sticky(pod("old", "half", "1", &web)))
	e.clock.Step(2*time.Minute + time.Second)
	if got := e.schedule(t, nodes, pods, sticky(pod("new", "", "1", &web))); got != "full" {
		t.Fatalf("after the TTL the pod went to %q, want the profile's %q", got, "full")
	}
}

// TestStickyNodeGoneOrFull: a node deleted, or too full for the
// replacement, means normal scheduling.
func TestStickyNodeGoneOrFull(t *testing.T) {
	nodes, pods := cluster()
	e := newEnv(t, "")
	e.pl.PodLeaving(klogger(t), sticky(pod("old", "gone", "1", &web)))
	if got := e.schedule(t, nodes, pods, sticky(pod("new", "", "1", &web))); got != "full" {
		t.Fatalf("with its node gone the pod went to %q, want the profile's %q", got, "full")
	}

	e = newEnv(t, "")
	pods = append(pods, pod("filler", "half", "5", &api)) // "half" has no room left
	e.pl.PodLeaving(klogger(t), sticky(pod("old", "half", "2", &web)))
	if got := e.schedule(t, nodes, pods, sticky(pod("new", "", "2", &web))); got != "full" {
		t.Fatalf("with its node full the pod went to %q, want the profile's %q", got, "full")
	}
}

// announce records h for old as the plugin's pod informer does when the
// executor writes it, before the eviction: old is still on its node.
func announce(t *testing.T, e *env, old *v1.Pod, h hint.Hint) {
	t.Helper()
	if !e.pl.book.Updated(klogger(t), old, hinted(old.DeepCopy(), h)) {
		t.Fatalf("hint of %s not recorded", old.Name)
	}
}

// TestRoomHeldForReplacements: from the moment a hint is known until its
// replacement is placed or the hint expires, other pods cannot take the
// room the replacement needs on its target, in any resource or in pod
// slots, while the replacement itself and pods that fit beside it can.
func TestRoomHeldForReplacements(t *testing.T) {
	// "half" (3 of 8 CPUs used) is the target of two 2-CPU replacements.
	// MostAllocated prefers "full" (6 of 8), then "half".
	setup := func(t *testing.T, args string) (*env, []*v1.Node, []*v1.Pod) {
		e := newEnv(t, args)
		nodes, pods := cluster()
		announce(t, e, pod("w1", "full", "2", &web), toNode)
		announce(t, e, pod("w2", "full", "2", &web), toNode)
		return e, nodes, pods
	}

	t.Run("other pods go elsewhere until the replacements are placed", func(t *testing.T) {
		e, nodes, pods := setup(t, "")
		// 5 free CPUs on "half", 4 promised: a 3-CPU pod of another owner
		// does not fit there; on "full" (2 free) neither.
		if got := e.schedule(t, nodes, pods, pod("burst-1", "", "3", &api)); got != "empty" {
			t.Fatalf("an unrelated 3-CPU pod went to %q, want %q: the held room was taken", got, "empty")
		}
		// A 1-CPU pod fits beside the promise, and on "full" first.
		if got := e.schedule(t, nodes, pods, pod("burst-2", "", "1", nil)); got != "full" {
			t.Fatalf("a 1-CPU pod went to %q, want %q", got, "full")
		}
		pods = append(pods, pod("burst-half", "half", "1", nil)) // 4 free now, all promised
		for i, name := range []string{"r1", "r2"} {
			got := e.schedule(t, nodes, pods, pod(name, "", "2", &web))
			if got != "half" {
				t.Fatalf("replacement %d went to %q, want its target %q", i+1, got, "half")
			}
			pods = append(pods, pod(name, got, "2", &web))
		}
		// Both placed: nothing is held any more.
		if got, _ := e.pl.PreFilter(e.ctx, framework.NewCycleState(), pod("later", "", "1", &api), nil); got != nil || len(promised(e.pl.book)) != 0 {
			t.Fatalf("room still held after the replacements were placed: %v", promised(e.pl.book))
		}
	})

	t.Run("a replacement is not held from its own room", func(t *testing.T) {
		e := newEnv(t, "")
		nodes, pods := cluster()
		pods = append(pods, pod("filler", "half", "3", &api)) // "half": 2 CPUs free, exactly one replacement
		announce(t, e, pod("w1", "full", "2", &web), toNode)
		if got := e.schedule(t, nodes, pods, pod("r1", "", "2", &web)); got != "half" {
			t.Fatalf("the replacement went to %q, want its target %q", got, "half")
		}
	})

	t.Run("pod slots", func(t *testing.T) {
		e := newEnv(t, "")
		nodes, pods := cluster()
		nodes[1].Status.Allocatable[v1.ResourcePods] = resource.MustParse("3") // "half" runs 1 pod: 2 slots, both promised
		announce(t, e, pod("w1", "full", "100m", &web), toNode)
		announce(t, e, pod("w2", "full", "100m", &web), toNode)
		nodes[0] = node("full", "1") // no room on "full"
		if got := e.schedule(t, nodes, pods, pod("tiny", "", "100m", &api)); got != "empty" {
			t.Fatalf("a pod took a promised pod slot on %q, want %q", got, "empty")
		}
	})

	t.Run("an expired hint holds nothing", func(t *testing.T) {
		e, nodes, pods := setup(t, `{"hintTTL":"2m"}`)
		e.clock.Step(2*time.Minute + time.Second)
		if got := e.schedule(t, nodes, pods, pod("burst", "", "3", &api)); got != "half" {
			t.Fatalf("after the hints expired a 3-CPU pod went to %q, want %q", got, "half")
		}
	})

	t.Run("a withdrawn hint holds nothing", func(t *testing.T) {
		e, nodes, pods := setup(t, "")
		for _, name := range []string{"w1", "w2"} {
			old := hinted(pod(name, "full", "2", &web), toNode)
			e.pl.book.Updated(klogger(t), old, pod(name, "full", "2", &web)) // the eviction failed
		}
		if got := e.schedule(t, nodes, pods, pod("burst", "", "3", &api)); got != "half" {
			t.Fatalf("after the hints were withdrawn a 3-CPU pod went to %q, want %q", got, "half")
		}
	})

	t.Run("a sticky pod's node is not held", func(t *testing.T) {
		e := newEnv(t, "")
		nodes, pods := cluster()
		e.pl.PodLeaving(klogger(t), sticky(pod("s", "half", "4", &web)))
		if got := e.schedule(t, nodes, pods, pod("burst", "", "4", &api)); got != "half" {
			t.Fatalf("a 4-CPU pod went to %q, want %q: a sticky pod's node was held", got, "half")
		}
	})
}

// TestHintConsumedWithoutScoring: kube-scheduler skips PreScore and Score
// when a single node is feasible; the replacement placed there still
// consumes its owner's hint, which then neither steers a later pod nor
// holds room any longer.
func TestHintConsumedWithoutScoring(t *testing.T) {
	e := newEnv(t, "")
	nodes, pods := cluster()
	announce(t, e, pod("w1", "full", "2", &web), toNode)
	snapshot := cache.NewSnapshot(pods, nodes)
	e.pl.nodes = snapshot
	state := framework.NewCycleState()
	r := pod("r1", "", "2", &web)
	if _, s := e.pl.PreFilter(e.ctx, state, r, nil); !s.IsSuccess() && !s.IsSkip() {
		t.Fatal(s)
	}
	// No PreScore: straight to Reserve on the only feasible node.
	if s := e.pl.Reserve(e.ctx, state, r, "half"); !s.IsSuccess() {
		t.Fatal(s)
	}
	if _, ok := e.pl.book.Next(api.UID); ok {
		t.Fatal("test setup: another owner has a hint")
	}
	if _, ok := e.pl.book.Next(web.UID); ok {
		t.Error("the hint is still free after its replacement was reserved a node")
	}
	if held := promised(e.pl.book); len(held) != 0 {
		t.Errorf("room still held: %v", held)
	}
	// Unreserve gives it back.
	e.pl.Unreserve(e.ctx, state, r, "half")
	if _, ok := e.pl.book.Next(web.UID); !ok {
		t.Error("Unreserve did not give the hint back")
	}
}

// promised is the room book promises, by node.
func promised(book *hint.Book) map[string]hint.Room {
	out := map[string]hint.Room{}
	book.Promised("", "", func(node string, r hint.Room) { out[node] = r })
	return out
}

// TestStickyThroughARollingUpdate: the first pod of a sticky Deployment's
// new ReplicaSet records the nodes of the old pods still running. A new pod
// that does not fit beside the old pod on the oldest recorded node goes to
// the next recorded node it fits on, not where the profile prefers; one
// that fits on no recorded node goes where the profile puts it and leaves
// the entry, which the next new pod takes once the old pod has left.
func TestStickyThroughARollingUpdate(t *testing.T) {
	e := newEnv(t, "")
	logger := klogger(t)
	of := func(name, hash, node string) *v1.Pod {
		rs := testutil.ControllerRef("ReplicaSet", "web-"+hash, types.UID("rs-"+hash))
		p := sticky(pod(name, node, "2", &rs))
		p.Labels = map[string]string{"pod-template-hash": hash}
		return p
	}
	nodes := []*v1.Node{node("a", "3"), node("b", "8"), node("full", "8")}
	oldA, oldB := of("old-a", "aaa", "a"), of("old-b", "aaa", "b")
	oldA.CreationTimestamp = metav1.NewTime(t0)
	oldB.CreationTimestamp = metav1.NewTime(t0.Add(time.Second))
	pods := []*v1.Pod{oldA, oldB, pod("filler", "full", "5", &api)}
	for _, p := range pods[:2] {
		e.pl.book.Added(logger, p)
	}
	first := of("new-1", "bbb", "")
	if n := e.pl.book.Added(logger, first); n != 2 {
		t.Fatalf("the rollout's first pod recorded %d nodes, want 2", n)
	}
	// a has no room beside old-a: b, the other old pod's node.
	if got := e.schedule(t, nodes, pods, first); got != "b" {
		t.Fatalf("the first new pod placed on %q, want b (a is full until old-a leaves)", got)
	}
	pods = append(pods, of("new-1", "bbb", "b"))
	// Neither recorded node has the room now: the profile's node, and a
	// is left to the next pod.
	if got := e.schedule(t, nodes, pods, of("new-2", "bbb", "")); got != "full" {
		t.Fatalf("the second new pod placed on %q, want the profile's full", got)
	}
	pods = append(pods, of("new-2", "bbb", "full"))
	// old-a leaves: the third new pod takes a.
	gone := oldA.DeepCopy()
	gone.DeletionTimestamp = &metav1.Time{Time: t0}
	e.pl.book.Updated(logger, oldA, gone)
	pods = slices.DeleteFunc(pods, func(p *v1.Pod) bool { return p.Name == "old-a" })
	if got := e.schedule(t, nodes, pods, of("new-3", "bbb", "")); got != "a" {
		t.Fatalf("the third new pod placed on %q, want a, which old-a left", got)
	}
}
