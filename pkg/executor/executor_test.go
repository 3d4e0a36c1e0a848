package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"

	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/history"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

const (
	ns     = "default"
	planID = "plan-1"
)

var (
	now         = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tinyBackoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 3}
	pdbError    = apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	otherTaint  = v1.Taint{Key: "example.com/maintenance", Value: "yes", Effect: v1.TaintEffectNoSchedule}
)

func newPod(name, node string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name + "-uid")},
		Spec:       v1.PodSpec{NodeName: node},
	}
}

func newNode(name string, taints ...v1.Taint) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{Taints: taints}}
}

// newMove moves the pod of that name from source to target; each pod has an
// owner of its own.
func newMove(name, source, target string) plan.Move {
	return plan.Move{
		Pod: ns + "/" + name, Namespace: ns, Name: name, UID: name + "-uid",
		Owner:   &plan.Owner{Kind: "ReplicaSet", Name: name + "-rs", UID: name + "-owner"},
		Profile: "default", Strategy: "LowNodeUtilization", Reason: "node is underutilized",
		Source: source, Target: target,
	}
}

func newPlan(moves ...plan.Move) *plan.Plan { return &plan.Plan{ID: planID, Moves: moves} }

type fixture struct {
	client   *fake.Clientset
	recorder *events.FakeRecorder
	clock    *testingclock.FakeClock
	metrics  *Metrics
}

func newFixture(objs ...runtime.Object) *fixture {
	return &fixture{
		client:   fake.NewClientset(objs...),
		recorder: events.NewFakeRecorder(100),
		clock:    testingclock.NewFakeClock(now),
		metrics:  NewMetrics(prometheus.NewRegistry()),
	}
}

// executor returns an Executor on the fixture; opt, if not nil, adjusts its options.
func (f *fixture) executor(opt func(*Options)) *Executor {
	o := Options{Client: f.client, Recorder: f.recorder, Metrics: f.metrics, Clock: f.clock, Backoff: tinyBackoff}
	if opt != nil {
		opt(&o)
	}
	return New(o)
}

// onEvict answers evictions with fn instead of the fake's default success.
func (f *fixture) onEvict(fn func(*policyv1.Eviction) error) {
	f.client.PrependReactor("create", "pods/eviction", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, fn(a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction))
	})
}

// replace adds the bound replacement of an evicted pod, as its owner and
// the scheduler would make it (through the tracker: the fake clientset is
// locked while its reactors run).
func (f *fixture) replace(t *testing.T, evicted, node string) {
	t.Helper()
	p := newPod(evicted+"-new", node)
	p.UID = types.UID(evicted + "-new-uid")
	p.CreationTimestamp = metav1.NewTime(f.clock.Now())
	p.Status.Phase = v1.PodPending
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: evicted + "-rs", UID: types.UID(evicted + "-owner"), Controller: ptr.To(true)}}
	if err := f.client.Tracker().Add(p); err != nil {
		t.Error(err) // not Fatal: called from reactors' and other goroutines
	}
}

// fail makes every action of that verb on that resource fail with err.
func (f *fixture) fail(verb, resource string, err error) {
	f.client.PrependReactor(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, err })
}

// calls lists the client's actions as "verb resource[/subresource] name".
func (f *fixture) calls() []string {
	var out []string
	for _, a := range f.client.Actions() {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		switch a := a.(type) {
		case k8stesting.GetAction: // patches too: they have a name the same way
			s += " " + a.GetName()
		case k8stesting.CreateAction:
			if ev, ok := a.GetObject().(*policyv1.Eviction); ok {
				s += " " + ev.Name
			}
		}
		out = append(out, s)
	}
	return out
}

// count counts the calls that start with prefix.
func (f *fixture) count(prefix string) int {
	n := 0
	for _, c := range f.calls() {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (f *fixture) pod(t *testing.T, name string) *v1.Pod {
	t.Helper()
	pod, err := f.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

func (f *fixture) taints(t *testing.T, node string) []v1.Taint {
	t.Helper()
	// The tracker, not the client: reading through the client from inside a
	// reactor would deadlock, and would add actions.
	obj, err := f.client.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", node)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*v1.Node).Spec.Taints
}

func reasons(r Result) []string {
	var out []string
	for _, s := range r.Skipped {
		out = append(out, s.Move.Name+":"+s.Reason)
	}
	return out
}

func names(moves []plan.Move) []string {
	var out []string
	for _, m := range moves {
		out = append(out, m.Name)
	}
	return out
}

func TestExecuteHintsThenEvicts(t *testing.T) {
	f := newFixture(newPod("web-1", "node-a"))
	var evicted []*policyv1.Eviction
	f.onEvict(func(ev *policyv1.Eviction) error {
		evicted = append(evicted, ev)
		return nil
	})

	r := f.executor(nil).Execute(context.Background(), newPlan(newMove("web-1", "node-a", "node-b")), nil)

	if got := names(r.Evicted); !slices.Equal(got, []string{"web-1"}) || len(r.Skipped) != 0 || r.Errors != 0 {
		t.Fatalf("evicted %v, skipped %v, errors %d; want only web-1 evicted", got, reasons(r), r.Errors)
	}
	want := []string{"get pods web-1", "patch pods web-1", "create pods/eviction web-1"}
	if got := f.calls(); !slices.Equal(got, want) {
		t.Errorf("API calls %q, want %q: the hint must be written before the eviction", got, want)
	}

	// The patch carries the UID, so a recreated pod is not annotated.
	patch := f.client.Actions()[1].(k8stesting.PatchAction)
	if patch.GetPatchType() != types.MergePatchType {
		t.Errorf("hint patch type %s, want %s", patch.GetPatchType(), types.MergePatchType)
	}
	var body struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(patch.GetPatch(), &body); err != nil {
		t.Fatal(err)
	}
	if body.Metadata.UID != "web-1-uid" {
		t.Errorf("hint patch %s: want metadata.uid web-1-uid as a precondition", patch.GetPatch())
	}
	h, found, err := hint.FromPod(f.pod(t, "web-1"))
	wantHint := hint.Hint{Source: "node-a", Target: "node-b", PlanID: planID, Time: now}
	if !found || err != nil || h.Source != wantHint.Source || h.Target != wantHint.Target || h.PlanID != wantHint.PlanID || !h.Time.Equal(now) {
		t.Errorf("hint on the pod: %+v (found %v, err %v), want %+v", h, found, err, wantHint)
	}

	if len(evicted) != 1 {
		t.Fatalf("%d evictions, want 1", len(evicted))
	}
	ev := evicted[0]
	if ev.Namespace != ns || ev.Name != "web-1" || ev.DeleteOptions == nil || ev.DeleteOptions.Preconditions == nil ||
		ev.DeleteOptions.Preconditions.UID == nil || *ev.DeleteOptions.Preconditions.UID != "web-1-uid" {
		t.Errorf("eviction %+v: want default/web-1 with UID precondition web-1-uid", ev)
	}

	wantEvents := []string{"Normal Rebalanced LowNodeUtilization: node-a → node-b (node is underutilized), plan plan-1"}
	if got := f.events(); !slices.Equal(got, wantEvents) {
		t.Errorf("events %q, want %q", got, wantEvents)
	}
}

func TestExecuteRetriesWhilePDBRefuses(t *testing.T) {
	for _, tc := range []struct {
		name         string
		refusals     int
		wantAttempts int
		wantEvicted  bool
	}{
		{name: "refused twice, then allowed", refusals: 2, wantAttempts: 3, wantEvicted: true},
		{name: "refused for good", refusals: 1000, wantAttempts: tinyBackoff.Steps},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(newPod("web-1", "node-a"))
			attempts := 0
			f.onEvict(func(*policyv1.Eviction) error {
				attempts++
				if attempts <= tc.refusals {
					return pdbError
				}
				return nil
			})

			r := f.executor(nil).Execute(context.Background(), newPlan(newMove("web-1", "node-a", "node-b")), nil)

			if attempts != tc.wantAttempts {
				t.Errorf("%d eviction attempts, want %d", attempts, tc.wantAttempts)
			}
			if r.Errors != 0 {
				t.Errorf("errors = %d, want 0: a PDB refusal is the cluster's answer, not an error", r.Errors)
			}
			_, hinted, _ := hint.FromPod(f.pod(t, "web-1"))
			evs := f.events()
			if tc.wantEvicted {
				if len(r.Evicted) != 1 {
					t.Fatalf("skipped %v, want web-1 evicted", reasons(r))
				}
				if !hinted {
					t.Error("the evicted pod lost its hint")
				}
				return
			}
			if got := reasons(r); !slices.Equal(got, []string{"web-1:pdb"}) {
				t.Fatalf("skipped %v, want web-1:pdb", got)
			}
			if hinted {
				t.Error("the hint stays on a pod that was not evicted")
			}
			if len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning RebalanceSkipped ") || !strings.Contains(evs[0], "pdb") {
				t.Errorf("events %q, want one RebalanceSkipped warning naming the pdb", evs)
			}
		})
	}
}

// TestExecuteEvictionsInBackground: a pod that asks to be evicted in the
// background (request-evict-only) and whose eviction is answered 429
// "Eviction triggered evacuation" is being evacuated by its owner: one
// attempt, reported in InBackground with its hint kept and its move
// remembered, counted as a background eviction. The same answer to a pod
// that did not ask is a refusal like a PDB's, retried, then skipped.
func TestExecuteEvictionsInBackground(t *testing.T) {
	evacuation := apierrors.NewTooManyRequests("Eviction triggered evacuation", 0)
	for _, tc := range []struct {
		name           string
		asks           bool
		wantAttempts   int
		wantBackground bool
	}{
		{name: "asked for", asks: true, wantAttempts: 1, wantBackground: true},
		{name: "not asked for", wantAttempts: tinyBackoff.Steps},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := newPod("vm-1", "node-a")
			if tc.asks {
				pod.Annotations = map[string]string{evictions.EvictionRequestAnnotationKey: ""}
			}
			f := newFixture(pod)
			attempts := 0
			f.onEvict(func(*policyv1.Eviction) error {
				attempts++
				return evacuation
			})
			moves := history.New(f.clock, time.Hour)
			r := f.executor(func(o *Options) { o.History = moves }).Execute(context.Background(), newPlan(newMove("vm-1", "node-a", "node-b")), nil)

			if attempts != tc.wantAttempts {
				t.Errorf("%d eviction attempts, want %d", attempts, tc.wantAttempts)
			}
			_, hinted, _ := hint.FromPod(f.pod(t, "vm-1"))
			background := testutil.ToFloat64(f.metrics.evictions.WithLabelValues("LowNodeUtilization", resultBackground))
			if !tc.wantBackground {
				if got := reasons(r); !slices.Equal(got, []string{"vm-1:pdb"}) || len(r.InBackground) != 0 || hinted || background != 0 {
					t.Errorf("skipped %v, in background %d, hinted %v, background evictions %v; want a pdb skip, no hint", got, len(r.InBackground), hinted, background)
				}
				return
			}
			if len(r.InBackground) != 1 || len(r.Evicted) != 0 || len(r.Skipped) != 0 || r.Errors != 0 {
				t.Fatalf("in background %d, evicted %d, skipped %v, errors %d; want vm-1 in the background alone", len(r.InBackground), len(r.Evicted), reasons(r), r.Errors)
			}
			if !hinted {
				t.Error("the pod being evacuated lost its hint: its replacement would not be steered")
			}
			if background != 1 {
				t.Errorf("evictions_total{result=background} = %v, want 1", background)
			}
			if _, ok := moves.InCooldown("vm-1-owner", "node-b", time.Time{}); !ok {
				t.Error("the move is not remembered: the cooldown would not hold for it")
			}
		})
	}
}

func TestExecuteContinuesAfterAPIErrors(t *testing.T) {
	for _, tc := range []struct {
		name       string
		verb, res  string
		err        error
		wantReason string
		wantHint   bool
	}{
		{name: "eviction 500", verb: "create", res: "pods/eviction", err: apierrors.NewInternalError(errors.New("etcd is sad")), wantReason: plan.ReasonError, wantHint: true},
		{name: "eviction timeout", verb: "create", res: "pods/eviction", err: apierrors.NewTimeoutError("request did not complete", 0), wantReason: plan.ReasonError, wantHint: true},
		{name: "eviction server timeout", verb: "create", res: "pods/eviction", err: apierrors.NewServerTimeout(schema.GroupResource{Resource: "pods"}, "create", 0), wantReason: plan.ReasonError, wantHint: true},
		{name: "hint patch 500", verb: "patch", res: "pods", err: apierrors.NewInternalError(errors.New("etcd is sad")), wantReason: plan.ReasonPatchFailed},
		{name: "pod read 500", verb: "get", res: "pods", err: apierrors.NewInternalError(errors.New("etcd is sad")), wantReason: plan.ReasonError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(newPod("web-1", "node-a"), newPod("web-2", "node-a"))
			first := true
			f.client.PrependReactor(tc.verb, tc.res, func(k8stesting.Action) (bool, runtime.Object, error) {
				if first {
					first = false
					return true, nil, tc.err
				}
				return false, nil, nil
			})

			r := f.executor(nil).Execute(context.Background(), newPlan(newMove("web-1", "node-a", "node-b"), newMove("web-2", "node-a", "node-b")), nil)

			if r.Errors != 1 {
				t.Errorf("errors = %d, want 1", r.Errors)
			}
			if got := reasons(r); !slices.Equal(got, []string{"web-1:" + tc.wantReason}) {
				t.Errorf("skipped %v, want web-1:%s", got, tc.wantReason)
			}
			if got := names(r.Evicted); !slices.Equal(got, []string{"web-2"}) {
				t.Errorf("evicted %v, want the next move, web-2, carried out", got)
			}
			if n := f.count("create pods/eviction web-1"); n != 1 && tc.res == "pods/eviction" {
				t.Errorf("%d eviction attempts for web-1, want 1: only 429 is retried", n)
			}
			// After an error the eviction may have gone through: the hint stays.
			if _, hinted, _ := hint.FromPod(f.pod(t, "web-1")); hinted != tc.wantHint {
				t.Errorf("web-1 hinted = %v, want %v", hinted, tc.wantHint)
			}
			want := []string{"Warning RebalanceSkipped ", "Normal Rebalanced "}
			if tc.verb == "get" {
				// The pod was never read: there is nothing to put an event on.
				want = want[1:]
			}
			evs := f.events()
			ok := len(evs) == len(want)
			for i := 0; ok && i < len(want); i++ {
				ok = strings.HasPrefix(evs[i], want[i])
			}
			if !ok || (tc.verb != "get" && !strings.Contains(evs[0], tc.wantReason)) {
				t.Errorf("events %q, want %q, the skip naming %s", evs, want, tc.wantReason)
			}
			if got := testutil.ToFloat64(f.metrics.evictions.WithLabelValues("LowNodeUtilization", resultError)); got != 1 {
				t.Errorf("rebalancer_evictions_total{result=error} = %v, want 1", got)
			}
		})
	}
}

func TestExecuteChecksTheLivePod(t *testing.T) {
	terminating := newPod("web-1", "node-a")
	terminating.DeletionTimestamp = &metav1.Time{Time: now}
	replaced := newPod("web-1", "node-a")
	replaced.UID = "web-1-new-uid"
	for _, tc := range []struct {
		name       string
		pods       []runtime.Object
		wantReason string
		wantEvent  bool
	}{
		{name: "deleted", wantReason: plan.ReasonGone},
		{name: "terminating", pods: []runtime.Object{terminating}, wantReason: plan.ReasonGone},
		{name: "recreated under the same name", pods: []runtime.Object{replaced}, wantReason: plan.ReasonUIDChanged},
		{name: "on another node", pods: []runtime.Object{newPod("web-1", "node-c")}, wantReason: plan.ReasonMoved, wantEvent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(tc.pods...)

			r := f.executor(nil).Execute(context.Background(), newPlan(newMove("web-1", "node-a", "node-b")), nil)

			if got := reasons(r); !slices.Equal(got, []string{"web-1:" + tc.wantReason}) || len(r.Evicted) != 0 || r.Errors != 0 {
				t.Errorf("skipped %v, evicted %v, errors %d; want only web-1:%s", got, names(r.Evicted), r.Errors, tc.wantReason)
			}
			if got := f.calls(); !slices.Equal(got, []string{"get pods web-1"}) {
				t.Errorf("API calls %q, want only the read: no hint, no eviction", got)
			}
			if evs := f.events(); (len(evs) == 1) != tc.wantEvent {
				t.Errorf("events %q, want an event: %v", evs, tc.wantEvent)
			}
		})
	}
}

func TestExecuteValidate(t *testing.T) {
	f := newFixture(newPod("web-1", "node-a"), newPod("web-2", "node-a"))
	var seen []*v1.Pod
	validate := func(_ context.Context, m plan.Move, pod *v1.Pod) (bool, string, string) {
		seen = append(seen, pod)
		return m.Name != "web-1", plan.ReasonNoFit, "node-b is full"
	}
	e := f.executor(nil)

	r := e.Execute(context.Background(), newPlan(newMove("web-1", "node-a", "node-b"), newMove("web-2", "node-a", "node-b")), validate)

	if got := reasons(r); !slices.Equal(got, []string{"web-1:no-fit"}) {
		t.Errorf("skipped %v, want web-1:no-fit", got)
	}
	if got := names(r.Evicted); !slices.Equal(got, []string{"web-2"}) {
		t.Errorf("evicted %v, want web-2", got)
	}
	if f.count("patch pods web-1")+f.count("create pods/eviction web-1") != 0 {
		t.Errorf("API calls %q: a refused move must write nothing", f.calls())
	}
	if len(seen) != 2 || seen[0].UID != "web-1-uid" {
		t.Errorf("Validate saw %d pods, want the live pods, web-1 first", len(seen))
	}

	// Each Execute has its own: the next plan's moves are not judged by
	// the recheck of the one before, nor by any without one.
	f.client.PrependReactor("create", "pods/eviction", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil // web-1 stays for the next plans
	})
	seen = nil
	r = e.Execute(context.Background(), newPlan(newMove("web-1", "node-a", "node-b")), func(context.Context, plan.Move, *v1.Pod) (bool, string, string) {
		return false, plan.ReasonLowGain, "the next plan's own"
	})
	if got := reasons(r); !slices.Equal(got, []string{"web-1:low-gain"}) || len(seen) != 0 {
		t.Errorf("second plan: skipped %v, the first plan's Validate called %d times; want web-1:low-gain, by the second plan's alone", got, len(seen))
	}
	if r := e.Execute(context.Background(), newPlan(newMove("web-1", "node-a", "node-b")), nil); len(r.Evicted) != 1 || len(seen) != 0 {
		t.Errorf("third plan, no Validate: evicted %v, skipped %v, an earlier Validate called %d times; want web-1 evicted unchecked", names(r.Evicted), reasons(r), len(seen))
	}
}

// TestExecuteGangWhole: a gang's members are all checked before the first
// is evicted. One refused member keeps every member (the others skipped as
// gang, naming it), even one planned before it; a pod of no gang between
// them goes on. With every member passing, all are evicted.
func TestExecuteGangWhole(t *testing.T) {
	member := func(name string) plan.Move {
		m := newMove(name, "node-a", "node-b")
		m.Gang = "train"
		return m
	}
	moves := []plan.Move{member("train-1"), newMove("web-1", "node-a", "node-b"), member("train-2")}
	pods := []runtime.Object{newPod("train-1", "node-a"), newPod("web-1", "node-a"), newPod("train-2", "node-a")}

	t.Run("a member refused", func(t *testing.T) {
		f := newFixture(pods...)
		validate := func(_ context.Context, m plan.Move, _ *v1.Pod) (bool, string, string) {
			return m.Name != "train-2", plan.ReasonNoFit, "node-b is full"
		}
		r := f.executor(nil).Execute(context.Background(), newPlan(moves...), validate)
		if got := reasons(r); !slices.Equal(got, []string{"train-1:gang", "train-2:no-fit"}) {
			t.Errorf("skipped %v, want train-1:gang, train-2:no-fit", got)
		}
		if got := names(r.Evicted); !slices.Equal(got, []string{"web-1"}) {
			t.Errorf("evicted %v, want web-1 only", got)
		}
		for _, s := range r.Skipped {
			if s.Pod == ns+"/train-1" && !strings.Contains(s.Detail, "train-2: no-fit") {
				t.Errorf("train-1's skip %q does not name train-2's refusal", s.Detail)
			}
		}
		if f.count("create pods/eviction train-1")+f.count("patch pods train-1") != 0 {
			t.Errorf("API calls %q: no member may be touched", f.calls())
		}
	})

	t.Run("all pass", func(t *testing.T) {
		f := newFixture(pods...)
		checked := 0
		validate := func(context.Context, plan.Move, *v1.Pod) (bool, string, string) {
			checked++
			return true, "", ""
		}
		r := f.executor(nil).Execute(context.Background(), newPlan(moves...), validate)
		if got := names(r.Evicted); !slices.Equal(got, []string{"train-1", "web-1", "train-2"}) {
			t.Errorf("evicted %v, want every move", got)
		}
		if checked != 3 {
			t.Errorf("Validate called %d times, want once a move", checked)
		}
	})
}

func TestExecuteStop(t *testing.T) {
	moves := []plan.Move{newMove("web-1", "node-a", "node-b"), newMove("web-2", "node-a", "node-b"), newMove("web-3", "node-a", "node-b")}
	pods := []runtime.Object{newPod("web-1", "node-a"), newPod("web-2", "node-a"), newPod("web-3", "node-a")}

	t.Run("before the plan", func(t *testing.T) {
		f := newFixture(pods...)
		stop := make(chan struct{})
		close(stop)

		r := f.executor(func(o *Options) { o.Stop = stop }).Execute(context.Background(), newPlan(moves...), nil)

		if got := reasons(r); len(r.Evicted) != 0 || !slices.Equal(got, []string{"web-1:stopped", "web-2:stopped", "web-3:stopped"}) {
			t.Errorf("evicted %v, skipped %v; want every move stopped", names(r.Evicted), got)
		}
		if got := f.calls(); len(got) != 0 {
			t.Errorf("API calls %q, want none", got)
		}
	})

	t.Run("during the first eviction", func(t *testing.T) {
		f := newFixture(pods...)
		stop := make(chan struct{})
		f.onEvict(func(*policyv1.Eviction) error {
			close(stop)
			return nil
		})

		r := f.executor(func(o *Options) { o.Stop = stop }).Execute(context.Background(), newPlan(moves...), nil)

		if got := names(r.Evicted); !slices.Equal(got, []string{"web-1"}) {
			t.Errorf("evicted %v, want only web-1", got)
		}
		if got := reasons(r); !slices.Equal(got, []string{"web-2:stopped", "web-3:stopped"}) {
			t.Errorf("skipped %v, want the rest stopped", got)
		}
		if n := f.count("create pods/eviction"); n != 1 {
			t.Errorf("%d evictions, want 1", n)
		}
	})

	// A stop or a cancellation cuts a PDB backoff short, and the hint of the
	// pod that stays is taken back.
	for _, how := range []string{"Stop", "context"} {
		t.Run("during a PDB backoff by "+how, func(t *testing.T) {
			f := newFixture(pods...)
			stop := make(chan struct{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f.onEvict(func(*policyv1.Eviction) error {
				if how == "Stop" {
					close(stop)
				} else {
					cancel()
				}
				return pdbError
			})
			e := f.executor(func(o *Options) {
				o.Stop = stop
				o.Backoff = wait.Backoff{Duration: time.Hour, Steps: 5}
			})

			done := make(chan Result)
			go func() { done <- e.Execute(ctx, newPlan(moves...), nil) }()
			var r Result
			select {
			case r = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Execute still waits out the backoff after the stop")
			}

			if got := reasons(r); len(r.Evicted) != 0 || !slices.Equal(got, []string{"web-1:stopped", "web-2:stopped", "web-3:stopped"}) {
				t.Errorf("evicted %v, skipped %v; want every move stopped", names(r.Evicted), got)
			}
			if n := f.count("create pods/eviction"); n != 1 {
				t.Errorf("%d eviction attempts, want 1", n)
			}
			if _, hinted, _ := hint.FromPod(f.pod(t, "web-1")); hinted {
				t.Error("web-1 keeps the hint of an eviction that did not happen")
			}
		})
	}
}

func TestExecuteCooldown(t *testing.T) {
	f := newFixture(newPod("web-1", "node-a"), newPod("web-2", "node-a"), newPod("web-3", "node-b"), newPod("web-4", "node-a"))
	sameOwner := func(name, source, target string) plan.Move {
		m := newMove(name, source, target)
		m.Owner = newMove("web-1", "", "").Owner
		return m
	}
	moves := history.New(f.clock, 10*time.Minute)
	cooling := func(node string) bool {
		_, ok := moves.InCooldown("web-1-owner", node, time.Time{})
		return ok
	}
	e := f.executor(func(o *Options) { o.History = moves })

	// Moves of one owner within a plan were simulated together: all go.
	r := e.Execute(context.Background(), newPlan(sameOwner("web-1", "node-a", "node-b"), sameOwner("web-2", "node-a", "node-b")), nil)
	if got := names(r.Evicted); !slices.Equal(got, []string{"web-1", "web-2"}) {
		t.Errorf("evicted %v, want web-1 and web-2", got)
	}
	if !cooling("node-b") || cooling("node-a") {
		t.Errorf("InCooldown: want the owner's pods on node-b (where it got moved pods) and not on node-a")
	}

	// A later plan leaves the owner's pods on node-b alone until the cooldown
	// is over; its pods elsewhere may move.
	f.clock.Step(9 * time.Minute)
	r = e.Execute(context.Background(), newPlan(sameOwner("web-3", "node-b", "node-c"), sameOwner("web-4", "node-a", "node-c")), nil)
	if !slices.Equal(reasons(r), []string{"web-3:cooldown"}) || !slices.Equal(names(r.Evicted), []string{"web-4"}) {
		t.Errorf("after 9m: evicted %v, skipped %v; want web-4 evicted, web-3 in cooldown", names(r.Evicted), reasons(r))
	}
	if n := f.count("get pods web-3"); n != 0 {
		t.Errorf("web-3 read %d times, want 0: the cooldown needs no API call", n)
	}
	f.clock.Step(time.Minute)
	if r := e.Execute(context.Background(), newPlan(sameOwner("web-3", "node-b", "node-c")), nil); !slices.Equal(names(r.Evicted), []string{"web-3"}) {
		t.Errorf("after 10m: evicted %v, skipped %v; want web-3 evicted", names(r.Evicted), reasons(r))
	}
}

func TestExecuteDrainGuard(t *testing.T) {
	consolidate := func(name, source, target string) plan.Move {
		m := newMove(name, source, target)
		m.Strategy, m.Drain = "Consolidation", true
		return m
	}
	drainTaint := v1.Taint{Key: wellknown.DrainTaintKey, Value: planID, Effect: v1.TaintEffectNoSchedule}
	objects := func() []runtime.Object {
		return []runtime.Object{
			newNode("node-a", otherTaint), newNode("node-b"), newNode("node-c"),
			newPod("web-1", "node-a"), newPod("web-2", "node-a"), newPod("web-3", "node-c"),
		}
	}
	p := newPlan(consolidate("web-1", "node-a", "node-b"), consolidate("web-2", "node-a", "node-c"), newMove("web-3", "node-c", "node-b"))

	t.Run("taints the source while it is emptied", func(t *testing.T) {
		f := newFixture(objects()...)
		taintsAt := map[string][]v1.Taint{}
		f.onEvict(func(ev *policyv1.Eviction) error {
			node := map[string]string{"web-1": "node-a", "web-2": "node-a", "web-3": "node-c"}[ev.Name]
			taintsAt[ev.Name] = f.taints(t, node)
			f.replace(t, ev.Name, "node-b")
			return nil
		})

		r := f.executor(nil).Execute(context.Background(), p, nil)

		if len(r.Evicted) != 3 {
			t.Fatalf("evicted %v, skipped %v; want all three", names(r.Evicted), reasons(r))
		}
		want := []v1.Taint{otherTaint, drainTaint}
		for _, pod := range []string{"web-1", "web-2"} {
			if got := taintsAt[pod]; !slices.Equal(got, want) {
				t.Errorf("node-a taints while %s is evicted: %v, want %v", pod, got, want)
			}
		}
		if got := taintsAt["web-3"]; len(got) != 0 {
			t.Errorf("node-c taints while web-3 is evicted: %v, want none: only Consolidation drains", got)
		}
		if got := f.taints(t, "node-a"); !slices.Equal(got, []v1.Taint{otherTaint}) {
			t.Errorf("node-a taints after the plan: %v, want only %v", got, otherTaint)
		}
		if n := f.count("patch nodes"); n != 2 {
			t.Errorf("%d node patches, want 2: taint once, untaint once", n)
		}
	})

	t.Run("taints every node the plan empties before its first eviction", func(t *testing.T) {
		// A replacement of an earlier move may be scheduled before a later
		// node's own evictions begin; the plan counts on that node being no
		// choice for it.
		f := newFixture(append(objects(), newNode("node-d"), newPod("web-4", "node-d"))...)
		var firstSeen map[string][]v1.Taint
		f.onEvict(func(ev *policyv1.Eviction) error {
			if firstSeen == nil {
				firstSeen = map[string][]v1.Taint{"node-a": f.taints(t, "node-a"), "node-d": f.taints(t, "node-d")}
			}
			f.replace(t, ev.Name, "node-b")
			return nil
		})
		p := newPlan(newMove("web-3", "node-c", "node-b"), consolidate("web-1", "node-a", "node-b"),
			consolidate("web-2", "node-a", "node-c"), consolidate("web-4", "node-d", "node-b"))

		r := f.executor(nil).Execute(context.Background(), p, nil)

		if len(r.Evicted) != 4 {
			t.Fatalf("evicted %v, skipped %v; want all four", names(r.Evicted), reasons(r))
		}
		if got, want := firstSeen["node-a"], []v1.Taint{otherTaint, drainTaint}; !slices.Equal(got, want) {
			t.Errorf("node-a taints at the plan's first eviction: %v, want %v", got, want)
		}
		if got, want := firstSeen["node-d"], []v1.Taint{drainTaint}; !slices.Equal(got, want) {
			t.Errorf("node-d taints at the plan's first eviction: %v, want %v", got, want)
		}
		for node, want := range map[string][]v1.Taint{"node-a": {otherTaint}, "node-d": nil} {
			if got := f.taints(t, node); !slices.Equal(got, want) {
				t.Errorf("%s taints after the plan: %v, want %v", node, got, want)
			}
		}
	})

	// The nodes a plan holds empty (--hold-empty-nodes) carry the drain
	// taint from before its first eviction until its replacements are bound.
	t.Run("taints the nodes the plan holds empty for the plan", func(t *testing.T) {
		f := newFixture(append(objects(), newNode("node-e"), newNode("node-f"))...)
		var atFirst map[string][]v1.Taint
		f.onEvict(func(ev *policyv1.Eviction) error {
			if atFirst == nil {
				atFirst = map[string][]v1.Taint{"node-e": f.taints(t, "node-e"), "node-f": f.taints(t, "node-f")}
			}
			f.replace(t, ev.Name, "node-b")
			return nil
		})
		held := *p
		held.HeldEmpty = []string{"node-e", "node-f"}

		r := f.executor(nil).Execute(context.Background(), &held, nil)

		if len(r.Evicted) != 3 {
			t.Fatalf("evicted %v, skipped %v; want all three", names(r.Evicted), reasons(r))
		}
		if v := testutil.ToFloat64(f.metrics.planHeld); v != 2 {
			t.Errorf("plan_held_empty_nodes = %v, want 2", v)
		}
		for _, node := range held.HeldEmpty {
			if got := atFirst[node]; !slices.Equal(got, []v1.Taint{drainTaint}) {
				t.Errorf("%s taints at the plan's first eviction: %v, want %v", node, got, drainTaint)
			}
			if got := f.taints(t, node); len(got) != 0 {
				t.Errorf("%s taints after the plan: %v, want none", node, got)
			}
		}
		if evs := f.events(); slices.ContainsFunc(evs, func(e string) bool { return strings.Contains(e, EventDrainTimeout) }) {
			t.Errorf("events %q: no drain timed out", evs)
		}
	})

	t.Run("skips the moves left to the scheduler when a node it holds cannot be tainted", func(t *testing.T) {
		f := newFixture(append(objects(), newNode("node-e"))...)
		f.onEvict(func(ev *policyv1.Eviction) error {
			f.replace(t, ev.Name, "node-b")
			return nil
		})
		steered := newMove("web-3", "node-c", "node-b")
		steered.Steered = true
		held := newPlan(consolidate("web-1", "node-a", "node-b"), consolidate("web-2", "node-a", "node-c"), steered)
		held.HeldEmpty = []string{"node-e", "node-gone"}

		r := f.executor(nil).Execute(context.Background(), held, nil)

		if got := names(r.Evicted); !slices.Equal(got, []string{"web-3"}) {
			t.Errorf("evicted %v, want the steered web-3 alone", got)
		}
		if got, want := reasons(r), []string{"web-1:" + plan.ReasonTaintFailed, "web-2:" + plan.ReasonTaintFailed}; !slices.Equal(got, want) {
			t.Errorf("skipped %v, want %v", got, want)
		}
		for _, s := range r.Skipped {
			if !strings.Contains(s.Detail, "node-gone") {
				t.Errorf("%s skipped with %q; want the node that could not be tainted named", s.Move.Pod, s.Detail)
			}
		}
		for _, node := range []string{"node-a", "node-e"} {
			if got := f.taints(t, node); slices.Contains(got, drainTaint) {
				t.Errorf("%s taints after the plan: %v, want no drain taint", node, got)
			}
		}
	})

	// The fake ignores contexts, so this checks that the release runs after a
	// cancellation, not that its calls outlive it.
	t.Run("untaints after a cancellation", func(t *testing.T) {
		f := newFixture(objects()...)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f.onEvict(func(*policyv1.Eviction) error {
			cancel()
			return nil
		})

		r := f.executor(nil).Execute(ctx, p, nil)

		if got := names(r.Evicted); !slices.Equal(got, []string{"web-1"}) {
			t.Errorf("evicted %v, want web-1 only", got)
		}
		if got := f.taints(t, "node-a"); !slices.Equal(got, []v1.Taint{otherTaint}) {
			t.Errorf("node-a taints after the plan: %v, want only %v", got, otherTaint)
		}
	})

	// node-a keeps its taint after its last eviction, its own replacements
	// bound, while the plan still evicts elsewhere and until every
	// replacement of the plan is bound; and only until then.
	t.Run("held for the whole plan", func(t *testing.T) {
		f := newFixture(objects()...)
		var taintedAtWeb3 bool
		bound := make(chan struct{})
		f.onEvict(func(ev *policyv1.Eviction) error {
			switch ev.Name {
			case "web-1":
				f.replace(t, "web-1", "node-b")
			case "web-2":
				f.replace(t, "web-2", "node-c")
			case "web-3":
				// node-a's own replacements are bound; the plan goes on.
				taintedAtWeb3 = slices.Contains(f.taints(t, "node-a"), drainTaint)
				// web-3's replacement binds a little after the plan's
				// last eviction: node-a waits for it.
				go func() {
					defer close(bound)
					time.Sleep(300 * time.Millisecond)
					if !slices.Contains(f.taints(t, "node-a"), drainTaint) {
						t.Error("node-a untainted while web-3's replacement was pending")
					}
					f.replace(t, "web-3", "node-b")
				}()
			}
			return nil
		})
		r := f.executor(nil).Execute(context.Background(), p, nil)
		<-bound
		if len(r.Evicted) != 3 || !taintedAtWeb3 {
			t.Errorf("evicted %v; node-a tainted while the plan still evicted: %v, want true", names(r.Evicted), taintedAtWeb3)
		}
		if got := f.taints(t, "node-a"); !slices.Equal(got, []v1.Taint{otherTaint}) {
			t.Errorf("node-a taints after the plan: %v, want only %v", got, otherTaint)
		}
	})

	t.Run("released after the timeout with an Event", func(t *testing.T) {
		f := newFixture(objects()...)
		f.onEvict(func(ev *policyv1.Eviction) error {
			if ev.Name == "web-1" {
				f.replace(t, "web-1", "node-b")
			}
			return nil // web-2's replacement never comes
		})
		r := f.executor(func(o *Options) { o.DrainTimeout = 300 * time.Millisecond }).Execute(context.Background(), p, nil)
		if len(r.Evicted) != 3 {
			t.Fatalf("evicted %v, want all three", names(r.Evicted))
		}
		if got := f.taints(t, "node-a"); !slices.Equal(got, []v1.Taint{otherTaint}) {
			t.Errorf("node-a taints after the timeout: %v, want only %v", got, otherTaint)
		}
		var found bool
		for len(f.recorder.Events) > 0 {
			ev := <-f.recorder.Events
			if strings.Contains(ev, EventDrainTimeout) {
				found = strings.Contains(ev, "ReplicaSet web-2-rs: 0 of 1 bound") && !strings.Contains(ev, "web-1-rs")
				if !found {
					t.Errorf("event %q: want it to name web-2-rs's pending replacement only", ev)
				}
			}
		}
		if !found {
			t.Error("no DrainTimeout event")
		}
	})

	t.Run("no eviction without the taint", func(t *testing.T) {
		f := newFixture(objects()...)
		f.fail("patch", "nodes", apierrors.NewInternalError(errors.New("etcd is sad")))

		r := f.executor(nil).Execute(context.Background(), p, nil)

		if got := reasons(r); !slices.Equal(got, []string{"web-1:taint-failed", "web-2:taint-failed"}) || r.Errors != 2 {
			t.Errorf("skipped %v with %d errors, want web-1 and web-2 taint-failed, 2 errors", got, r.Errors)
		}
		if n := f.count("create pods/eviction web-1") + f.count("create pods/eviction web-2") + f.count("patch pods web-1") + f.count("patch pods web-2"); n != 0 {
			t.Errorf("API calls %q: want no hint and no eviction off node-a", f.calls())
		}
	})
}

// TestReplacementBoundBeforeItsEvictionReturns: the owner's controller may
// create the replacement, and its scheduler bind it, before the eviction
// request returns to the executor. The drain guard counts it all the
// same: the drained node is released as the plan ends, not at its
// timeout with an Event saying a replacement is pending.
func TestReplacementBoundBeforeItsEvictionReturns(t *testing.T) {
	f := newFixture(newNode("node-a"), newNode("node-b"), newPod("web-1", "node-a"))
	m := newMove("web-1", "node-a", "node-b")
	m.Drain = true
	// The fake clientset does not replay to a watch what was added before
	// it opened, and runs its reactors one at a time.
	watching := make(chan struct{})
	var open sync.Once
	f.client.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		open.Do(func() { close(watching) })
		return false, nil, nil
	})
	f.onEvict(func(ev *policyv1.Eviction) error {
		select {
		case <-watching:
			f.replace(t, ev.Name, "node-b")
			time.Sleep(200 * time.Millisecond) // the watch sees it before the request returns
		default:
			// Not open yet (it opens as the guard syncs, before the
			// first eviction): added once it is, without forcing the order.
			go func() { <-watching; f.replace(t, ev.Name, "node-b") }()
		}
		return nil
	})
	r := f.executor(func(o *Options) { o.DrainTimeout = 2 * time.Second }).Execute(context.Background(), newPlan(m), nil)
	if got := names(r.Evicted); !slices.Equal(got, []string{"web-1"}) {
		t.Fatalf("evicted %v, want web-1", got)
	}
	if got := f.taints(t, "node-a"); len(got) != 0 {
		t.Errorf("node-a taints after the plan: %v, want none", got)
	}
	for len(f.recorder.Events) > 0 {
		if ev := <-f.recorder.Events; strings.Contains(ev, EventDrainTimeout) {
			t.Errorf("event %q: the replacement was bound before the plan ended", ev)
		}
	}
}

func TestCleanupDrainTaints(t *testing.T) {
	leftover := v1.Taint{Key: wellknown.DrainTaintKey, Value: "crashed-plan", Effect: v1.TaintEffectNoSchedule}
	f := newFixture(newNode("node-a", otherTaint, leftover), newNode("node-b", leftover), newNode("node-c", otherTaint))

	lifted, err := f.executor(nil).CleanupDrainTaints(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(lifted, []string{"node-a", "node-b"}) {
		t.Errorf("lifted %v, want node-a and node-b", lifted)
	}
	want := "Warning DrainTaintLifted Removed the drain taint " + wellknown.DrainTaintKey + "=crashed-plan left by plan crashed-plan of an earlier run"
	events := f.events()
	if len(events) != 2 || !strings.HasPrefix(events[0], want) || !strings.HasPrefix(events[1], want) {
		t.Errorf("events %q, want two starting %q", events, want)
	}
	if n := testutil.ToFloat64(f.metrics.leftBehind); n != 2 {
		t.Errorf("rebalancer_drain_taints_left_behind_total %g, want 2", n)
	}

	for node, want := range map[string][]v1.Taint{"node-a": {otherTaint}, "node-b": nil, "node-c": {otherTaint}} {
		if got := f.taints(t, node); !slices.Equal(got, want) {
			t.Errorf("%s taints %v, want %v", node, got, want)
		}
	}
	if got := f.calls(); slices.Contains(got, "patch nodes node-c") {
		t.Errorf("API calls %q: node-c has no drain taint and must not be patched", got)
	}
}

func TestExecuteRefusesAnInvalidHint(t *testing.T) {
	f := newFixture(newPod("web-1", "node-a"))
	p := newPlan(newMove("web-1", "node-a", "node-b"))
	p.ID = ""

	r := f.executor(nil).Execute(context.Background(), p, nil)

	if got := reasons(r); !slices.Equal(got, []string{"web-1:error"}) || r.Errors != 1 {
		t.Errorf("skipped %v with %d errors, want web-1:error, 1 error", got, r.Errors)
	}
	if got := f.calls(); !slices.Equal(got, []string{"get pods web-1"}) {
		t.Errorf("API calls %q, want only the read", got)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixture(newPod("web-1", "node-a"), newPod("web-3", "node-a"), newPod("web-4", "node-a"))
	f.metrics = NewMetrics(reg)
	f.fail("create", "pods/eviction", apierrors.NewInternalError(errors.New("etcd is sad")))
	validate := func(_ context.Context, m plan.Move, _ *v1.Pod) (bool, string, string) {
		return m.Name != "web-3", fmt.Sprintf("free text naming %s", m.Pod), ""
	}
	e := f.executor(nil)
	f.client.PrependReactor("create", "pods/eviction", func(a k8stesting.Action) (bool, runtime.Object, error) {
		// web-1 is evicted; web-4 falls through to the 500.
		return a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction).Name == "web-1", nil, nil
	})

	e.Execute(context.Background(), newPlan(
		newMove("web-1", "node-a", "node-b"), // evicted
		newMove("web-2", "node-a", "node-b"), // gone
		newMove("web-3", "node-a", "node-b"), // rejected by Validate
		newMove("web-4", "node-a", "node-b"), // 500
	), validate)

	for _, c := range []struct {
		c    prometheus.Collector
		want float64
	}{
		{f.metrics.evictions.WithLabelValues("LowNodeUtilization", resultEvicted), 1},
		{f.metrics.evictions.WithLabelValues("LowNodeUtilization", resultSkipped), 2},
		{f.metrics.evictions.WithLabelValues("LowNodeUtilization", resultError), 1},
		{f.metrics.skips.WithLabelValues(plan.ReasonGone), 1},
		{f.metrics.skips.WithLabelValues(plan.ReasonRejected), 1},
		{f.metrics.skips.WithLabelValues(plan.ReasonError), 1},
		{f.metrics.skips.WithLabelValues(plan.ReasonPDB), 0},
	} {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s = %v, want %v", c.c.(prometheus.Metric).Desc(), got, c.want)
		}
	}
	// Validate's free text never becomes a label; every reason starts at 0.
	if n := testutil.CollectAndCount(reg, "rebalancer_skips_total"); n != len(plan.Reasons) {
		t.Errorf("%d rebalancer_skips_total series, want %d (one per reason)", n, len(plan.Reasons))
	}
}

// TestExecuteReportsPlannerRefusals: pods the planner refused for a PDB or
// for want of a node get a RebalanceSkipped event; routine refusals do not.
// The plan's size and expected nodes in use are exported as metrics.
func TestExecuteReportsPlannerRefusals(t *testing.T) {
	f := newFixture()
	p := newPlan()
	p.Skipped = []plan.Skip{
		{Pod: ns + "/db-0", UID: "uid-db-0", Strategy: "Consolidation", Reason: plan.ReasonPDB, Detail: "PodDisruptionBudget default/db allows no further disruption"},
		{Pod: ns + "/big-0", UID: "uid-big-0", Strategy: "RemovePodsViolatingNodeTaints", Reason: plan.ReasonNoFit, Detail: "0/3 nodes are available"},
		{Pod: ns + "/web-0", UID: "uid-web-0", Strategy: "RemoveDuplicates", Reason: plan.ReasonSameNode},
	}
	p.Summary = plan.Summary{NodesInUseBefore: 6, NodesInUseAfter: 3}
	f.executor(nil).Execute(context.Background(), p, nil)
	got := f.events()
	if len(got) != 2 {
		t.Fatalf("events %q, want two RebalanceSkipped (pdb, no-fit)", got)
	}
	for i, want := range []string{"pdb", "no-fit"} {
		if !strings.Contains(got[i], EventRebalanceSkipped) || !strings.Contains(got[i], want) {
			t.Errorf("event %q does not report %s", got[i], want)
		}
	}
	if v := testutil.ToFloat64(f.metrics.nodesInUse.WithLabelValues("after")); v != 3 {
		t.Errorf("nodes_in_use{when=after} = %v, want 3", v)
	}
	if v := testutil.ToFloat64(f.metrics.planMoves); v != 0 {
		t.Errorf("plan_moves = %v, want 0", v)
	}
}

// At a pace of one eviction every 1000 s the second move waits its turn,
// and a stop during the wait skips it: nothing is written for it.
func TestExecutePacedStopsWhileWaiting(t *testing.T) {
	f := newFixture(newPod("web-1", "node-a"), newPod("web-2", "node-a"))
	stop := make(chan struct{})
	e := f.executor(func(o *Options) { o.MaxEvictionsPerSecond = 0.001; o.Stop = stop })
	f.onEvict(func(ev *policyv1.Eviction) error {
		if ev.Name == "web-1" {
			go func() { time.Sleep(100 * time.Millisecond); close(stop) }()
		}
		return nil
	})
	r := e.Execute(context.Background(), newPlan(newMove("web-1", "node-a", "node-b"), newMove("web-2", "node-a", "node-b")), nil)
	if !slices.Equal(names(r.Evicted), []string{"web-1"}) || !slices.Equal(reasons(r), []string{"web-2:stopped"}) {
		t.Errorf("evicted %v, skipped %v; want web-1 evicted, web-2 stopped while waiting", names(r.Evicted), reasons(r))
	}
	if n := f.count("patch pods web-2") + f.count("create pods/eviction web-2"); n != 0 {
		t.Errorf("API calls %q: nothing may be written for a move stopped while waiting", f.calls())
	}
}

// TestRecordPlanned: a dry-run records one RebalancePlanned event a move and
// touches nothing else.
func TestRecordPlanned(t *testing.T) {
	f := newFixture(newPod("a", "n1"), newPod("b", "n1"))
	f.executor(nil).RecordPlanned(newPlan(newMove("a", "n1", "n2"), newMove("b", "n1", "n3")))
	if calls := f.calls(); len(calls) != 0 {
		t.Errorf("a dry-run made API calls %v", calls)
	}
	var got []string
	for len(f.recorder.Events) > 0 {
		got = append(got, <-f.recorder.Events)
	}
	if len(got) != 2 || !strings.Contains(got[0], "Normal RebalancePlanned dry run: LowNodeUtilization would move it n1 → n2") ||
		!strings.Contains(got[1], "n1 → n3") {
		t.Errorf("events %q, want a RebalancePlanned event a move", got)
	}
}
