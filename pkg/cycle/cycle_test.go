package cycle

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"

	"github.com/rebalancer-dev/rebalancer/pkg/executor"
	"github.com/rebalancer-dev/rebalancer/pkg/history"
	"github.com/rebalancer-dev/rebalancer/pkg/inputs"
	"github.com/rebalancer-dev/rebalancer/pkg/optout"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/planner"
	"github.com/rebalancer-dev/rebalancer/pkg/session"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
	"github.com/rebalancer-dev/rebalancer/pkg/synthetic"
)

// fixture is a generated cluster in a fake API server, which the view
// shows as the generator made it, and a runner of the shipped binpacking
// pair on it.
type fixture struct {
	client *fake.Clientset
	// views counts the reads of the cluster; onView runs at each.
	views  int
	onView func(n int)
	out    bytes.Buffer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	snap := generate(t)
	var objs []runtime.Object
	for _, n := range snap.Nodes {
		objs = append(objs, n)
	}
	for _, p := range snap.Pods {
		objs = append(objs, p)
	}
	return &fixture{client: fake.NewClientset(objs...)}
}

func generate(t *testing.T) *snapshot.Snapshot {
	t.Helper()
	snap, err := synthetic.Generate(synthetic.Options{Nodes: 60, Pods: 900, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func (f *fixture) view(t *testing.T) session.View {
	return func(context.Context, kubernetes.Interface) (*snapshot.Snapshot, error) {
		f.views++
		if f.onView != nil {
			f.onView(f.views)
		}
		return generate(t), nil
	}
}

func (f *fixture) runner(dryRun bool) *runner {
	pol := func(name string) string { return filepath.Join("..", "..", "policies", name) }
	o := Options{
		Client: f.client,
		Session: session.New(session.Options{
			Files:   inputs.Files{Policy: pol("binpacking-policy.yaml"), SchedulerConfigs: []string{pol("binpacking-scheduler.yaml")}},
			Client:  f.client,
			Planner: planner.Options{MinScoreGain: 1},
		}),
		History: history.New(clock.RealClock{}, time.Hour),
		DryRun:  dryRun,
		Output:  "json",
		Out:     &f.out,
	}
	return &runner{o: o, ex: executor.New(executor.Options{
		Client: f.client, Recorder: executor.NewEventRecorder(f.client, ktesting.NewLogger(nil, ktesting.DefaultConfig)),
		History: o.History, DrainTimeout: 100 * time.Millisecond,
	})}
}

func (f *fixture) printed(t *testing.T) printed {
	t.Helper()
	var got printed
	if err := json.Unmarshal(f.out.Bytes(), &got); err != nil {
		t.Fatalf("the cycle printed %q: %v", f.out.String(), err)
	}
	if got.Plan == nil || len(got.Plan.Moves) == 0 {
		t.Fatal("the plan moves nothing: nothing to check")
	}
	return got
}

func (f *fixture) evictions() int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "create" && a.GetSubresource() == "eviction" {
			n++
		}
	}
	return n
}

// TestCycleRechecksOnAFreshView: a cycle plans on one read of the cluster
// and gives the executor the recheck of its plan on a second: pods that
// opted out in between are not moved, and say why.
func TestCycleRechecksOnAFreshView(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	f.onView = func(n int) {
		if n != 2 { // the recheck's read
			return
		}
		pods, _ := f.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		for i := range pods.Items {
			p := &pods.Items[i]
			metav1.SetMetaDataAnnotation(&p.ObjectMeta, optout.KarpenterDoNotDisrupt, "true")
			if _, err := f.client.CoreV1().Pods(p.Namespace).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Error(err)
			}
		}
	}
	if err := f.runner(false).cycle(ctx, f.view(t), false); err != nil {
		t.Fatal(err)
	}
	got := f.printed(t)
	if f.views != 2 {
		t.Errorf("the cluster was read %d times, want twice: the plan's and the recheck's", f.views)
	}
	if got.Result == nil || len(got.Result.Evicted) != 0 || len(got.Result.Skipped) != len(got.Plan.Moves) {
		t.Fatalf("result %+v of %d moves, want every move skipped", got.Result, len(got.Plan.Moves))
	}
	for _, s := range got.Result.Skipped {
		if s.Reason != plan.ReasonOptOut {
			t.Errorf("%s skipped as %s (%s), want %s: the recheck judges it", s.Pod, s.Reason, s.Detail, plan.ReasonOptOut)
		}
	}
	if n := f.evictions(); n != 0 {
		t.Errorf("%d evictions, want none", n)
	}
}

// TestCycleDryRun: a dry-run prints its plan and records a RebalancePlanned
// event on each pod it would move, and evicts nothing.
func TestCycleDryRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	if err := f.runner(true).cycle(ctx, f.view(t), false); err != nil {
		t.Fatal(err)
	}
	got := f.printed(t)
	if got.Result != nil || f.views != 1 {
		t.Errorf("a dry-run printed result %+v after %d reads of the cluster, want none after one", got.Result, f.views)
	}
	if n := f.evictions(); n != 0 {
		t.Errorf("%d evictions, want none", n)
	}
	evs, err := f.client.EventsV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	planned := 0
	for _, ev := range evs.Items {
		if ev.Reason == executor.EventRebalancePlanned {
			planned++
		}
	}
	if planned != len(got.Plan.Moves) {
		t.Errorf("%d %s events, want one a move (%d): %v", planned, executor.EventRebalancePlanned, len(got.Plan.Moves), reasons(evs.Items))
	}
}

func reasons(evs []eventsv1.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Reason)
	}
	return out
}
