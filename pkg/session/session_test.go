package session

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/ktesting"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"k8s.io/utils/clock"

	"github.com/rebalancer-dev/rebalancer/pkg/history"
	"github.com/rebalancer-dev/rebalancer/pkg/inputs"
	"github.com/rebalancer-dev/rebalancer/pkg/live"
	"github.com/rebalancer-dev/rebalancer/pkg/planner"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
	"github.com/rebalancer-dev/rebalancer/pkg/synthetic"
)

func policies(name string) string { return filepath.Join("..", "..", "policies", name) }

// TestSessionPlansAsThePlannerDoes: a session's plan on a cluster in
// memory is the planner's on a simulation of that cluster with the same
// inputs, for the shipped pairs; the session adds only what it resolves
// (here, no extender and no opt-in: nothing).
func TestSessionPlansAsThePlannerDoes(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	snap, err := synthetic.Generate(synthetic.Options{Nodes: 60, Pods: 900, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, pair := range []string{"binpacking", "balancing"} {
		t.Run(pair, func(t *testing.T) {
			files := inputs.Files{Policy: policies(pair + "-policy.yaml"), SchedulerConfigs: []string{policies(pair + "-scheduler.yaml")}, Cluster: snap}
			opts := planner.Options{ID: "p", MinScoreGain: 1}
			s := New(Options{Files: files, Planner: opts, UsageWindow: time.Minute})
			got, opened, err := s.Plan(ctx, nil, history.New(clock.RealClock{}, time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			if opened.Snapshot != snap || len(opened.Warnings) > 0 {
				t.Errorf("opened snapshot %p (want the cluster given, %p), warnings %q", opened.Snapshot, snap, opened.Warnings)
			}
			in, err := inputs.Load(ctx, files, nil)
			if err != nil {
				t.Fatal(err)
			}
			sim, err := simulator.New(ctx, in.Schedulers, snap)
			if err != nil {
				t.Fatal(err)
			}
			want, err := planner.Plan(ctx, sim, in.Policy, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(want.Moves) == 0 {
				t.Fatal("the planner plans nothing: the comparison proves nothing")
			}
			if !reflect.DeepEqual(got.Moves, want.Moves) || !reflect.DeepEqual(got.Skipped, want.Skipped) {
				t.Errorf("session: %d moves, %d skips; planner: %d moves, %d skips", len(got.Moves), len(got.Skipped), len(want.Moves), len(want.Skipped))
			}
		})
	}
}

// TestOpenResolvesTheOptIn: an opt-in selector given to the session makes
// the webhook's rule part of the inputs, offline, and the plan says how
// many pods it plans as the scheduler the webhook gives them.
func TestOpenResolvesTheOptIn(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	snap, err := synthetic.Generate(synthetic.Options{Nodes: 20, Pods: 200, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range snap.Pods {
		pod.Spec.SchedulerName = "default-scheduler"
	}
	for _, ns := range snap.Namespaces {
		ns.Labels = map[string]string{"opt": "in"}
	}
	if len(snap.Namespaces) == 0 {
		t.Fatal("the synthetic cluster has no namespaces to opt in")
	}
	files := inputs.Files{Policy: policies("binpacking-policy.yaml"), SchedulerConfigs: []string{policies("binpacking-scheduler.yaml")}, Cluster: snap}
	without, err := New(Options{Files: files}).Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if without.Inputs.OptIn != nil {
		t.Errorf("without a selector offline, opt-in %v", without.Inputs.OptIn)
	}
	sel := labels.SelectorFromSet(labels.Set{"opt": "in"})
	s := New(Options{Files: files, OptIn: sel, OptInFrom: "--opt-in-namespaces opt=in", Planner: planner.Options{MinScoreGain: 1}})
	opened, err := s.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if opened.Inputs.OptIn == nil || opened.Inputs.OptIn.From != "--opt-in-namespaces opt=in" {
		t.Fatalf("opt-in %+v, want the selector's", opened.Inputs.OptIn)
	}
	// Inputs loaded once and opened again (a daemon's every read) are
	// resolved afresh each time, not modified.
	in := without.Inputs
	again, err := s.OpenLoaded(ctx, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if in.OptIn != nil || again.Inputs == in || again.Inputs.OptIn == nil {
		t.Errorf("opening loaded inputs: given %+v, opened %+v; want the opt-in on the opened copy only", in.OptIn, again.Inputs.OptIn)
	}
	p, _, err := s.Plan(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range p.Warnings {
		found = found || strings.Contains(w, "opted in (--opt-in-namespaces opt=in)")
	}
	if !found {
		t.Errorf("warnings %q do not say which pods are planned as opted in", p.Warnings)
	}
}

// TestCapture: a capture is the view's cluster with the usage sampled
// through the session's client; without metrics.k8s.io it is the cluster
// alone, not an error; a policy that cannot be loaded is one.
func TestCapture(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	view := func(context.Context, kubernetes.Interface) (*snapshot.Snapshot, error) {
		return &snapshot.Snapshot{Nodes: []*v1.Node{node}}, nil
	}
	metricsServer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var out any
		switch r.URL.Path {
		case live.NodeMetricsPath:
			out = metricsv1beta1.NodeMetricsList{Items: []metricsv1beta1.NodeMetrics{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Timestamp: metav1.Now(),
				Usage: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")}}}}
		case live.PodMetricsPath:
			out = metricsv1beta1.PodMetricsList{}
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	capture := func(h http.Handler, policyFile string) (*snapshot.Snapshot, error) {
		srv := httptest.NewServer(h)
		defer srv.Close()
		client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		s := New(Options{Files: inputs.Files{Policy: policyFile}, Client: client, UsageInterval: time.Millisecond})
		return s.Capture(ctx, view)
	}

	snap, err := capture(metricsServer, "")
	if err != nil || len(snap.Nodes) != 1 || len(snap.NodeMetrics) != 1 {
		t.Errorf("with metrics-server: %v, snapshot %v; want n1 and its usage", err, snap)
	}
	snap, err = capture(http.NotFoundHandler(), policies("binpacking-policy.yaml"))
	if err != nil || len(snap.Nodes) != 1 || len(snap.NodeMetrics) != 0 {
		t.Errorf("without metrics.k8s.io: %v, snapshot %v; want n1 without usage, no error", err, snap)
	}
	if _, err := capture(metricsServer, filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("a policy that cannot be read: no error")
	}
}
