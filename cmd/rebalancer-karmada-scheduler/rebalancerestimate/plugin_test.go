package rebalancerestimate

import (
	"context"
	"errors"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	estimatorclient "github.com/karmada-io/karmada/pkg/estimator/client"
	"github.com/karmada-io/karmada/pkg/scheduler/framework"
	"github.com/karmada-io/karmada/pkg/util"
)

// fakeEstimator answers from a table by cluster name (a missing cluster is an
// error, -1 is no opinion) and records what it was asked.
type fakeEstimator struct {
	mu      sync.Mutex
	fits    map[string]int32
	asked   int
	objects []string
}

func (f *fakeEstimator) MaxAvailableReplicas(ctx context.Context, clusters []*clusterv1alpha1.Cluster,
	_ *workv1alpha2.ReplicaRequirements) ([]workv1alpha2.TargetCluster, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	if o, ok := ctx.Value(util.ContextKeyObject).(string); ok {
		f.objects = append(f.objects, o)
	}
	out := make([]workv1alpha2.TargetCluster, len(clusters))
	for i, c := range clusters {
		n, ok := f.fits[c.Name]
		if !ok {
			return nil, errors.New("estimator of " + c.Name + " unreachable")
		}
		out[i] = workv1alpha2.TargetCluster{Name: c.Name, Replicas: n}
	}
	return out, nil
}

func (f *fakeEstimator) MaxAvailableComponentSets(_ context.Context,
	req estimatorclient.ComponentSetEstimationRequest) ([]estimatorclient.ComponentSetEstimationResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	out := make([]estimatorclient.ComponentSetEstimationResponse, len(req.Clusters))
	for i, c := range req.Clusters {
		out[i] = estimatorclient.ComponentSetEstimationResponse{Name: c.Name, Sets: f.fits[c.Name]}
	}
	return out, nil
}

func cluster(name string) *clusterv1alpha1.Cluster {
	return &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func deployment(replicas int32, scheduling policyv1alpha1.ReplicaSchedulingType, clusters ...workv1alpha2.TargetCluster) *workv1alpha2.ResourceBindingSpec {
	return &workv1alpha2.ResourceBindingSpec{
		Resource: workv1alpha2.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web",
			UID: "uid-web", ResourceVersion: "7"},
		Replicas:            replicas,
		ReplicaRequirements: &workv1alpha2.ReplicaRequirements{},
		Clusters:            clusters,
		Placement: &policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType: scheduling}},
	}
}

func plugin(mode string, est estimatorclient.ReplicaEstimator) *Plugin {
	return New(mode, func() estimatorclient.ReplicaEstimator { return est })
}

func TestFilter(t *testing.T) {
	est := &fakeEstimator{fits: map[string]int32{"none": 0, "three": 3, "ten": 10, "no-opinion": -1}}
	divided, dup := policyv1alpha1.ReplicaSchedulingTypeDivided, policyv1alpha1.ReplicaSchedulingTypeDuplicated
	for _, tc := range []struct {
		name    string
		spec    *workv1alpha2.ResourceBindingSpec
		cluster string
		want    framework.Code
	}{
		{"divided: no replica fits", deployment(5, divided), "none", framework.Unschedulable},
		{"divided: some fit", deployment(5, divided), "three", framework.Success},
		{"duplicated: not all fit", deployment(5, dup), "three", framework.Unschedulable},
		{"duplicated: all fit", deployment(5, dup), "ten", framework.Success},
		{"already placed there: kept whatever the answer", deployment(5, divided, workv1alpha2.TargetCluster{Name: "none", Replicas: 2}), "none", framework.Success},
		{"no opinion (-1)", deployment(5, divided), "no-opinion", framework.Success},
		{"estimator unreachable", deployment(5, divided), "unknown", framework.Success},
		{"not a workload", deployment(0, divided), "none", framework.Success},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := plugin(Pack, est).Filter(context.Background(), tc.spec, nil, cluster(tc.cluster))
			if got.Code() != tc.want {
				t.Errorf("Filter = %v %v, want %v", got.Code(), got.Reasons(), tc.want)
			}
		})
	}
}

func TestFilterWithoutEstimators(t *testing.T) {
	p := New(Pack, func() estimatorclient.ReplicaEstimator { return nil })
	if got := p.Filter(context.Background(), deployment(5, policyv1alpha1.ReplicaSchedulingTypeDivided), nil, cluster("a")); !got.IsSuccess() {
		t.Errorf("without estimators Filter = %v %v, want Success (no opinion)", got.Code(), got.Reasons())
	}
}

// scores runs Score on each cluster and NormalizeScore on the list, as
// Karmada's framework does.
func scores(t *testing.T, p *Plugin, spec *workv1alpha2.ResourceBindingSpec, names ...string) map[string]int64 {
	t.Helper()
	var list framework.ClusterScoreList
	for _, n := range names {
		s, res := p.Score(context.Background(), spec, cluster(n))
		if !res.IsSuccess() {
			t.Fatalf("Score(%s): %v", n, res.AsError())
		}
		list = append(list, framework.ClusterScore{Cluster: cluster(n), Score: s})
	}
	if res := p.ScoreExtensions().NormalizeScore(context.Background(), list); !res.IsSuccess() {
		t.Fatalf("NormalizeScore: %v", res.AsError())
	}
	out := map[string]int64{}
	for _, s := range list {
		if s.Score < framework.MinClusterScore || s.Score > framework.MaxClusterScore {
			t.Errorf("%s scored %d, outside [%d, %d]", s.Cluster.Name, s.Score, framework.MinClusterScore, framework.MaxClusterScore)
		}
		out[s.Cluster.Name] = s.Score
	}
	return out
}

func TestScorePack(t *testing.T) {
	est := &fakeEstimator{fits: map[string]int32{"roomy": 40, "tight": 4, "snug": 6, "short": 3, "shorter": 1, "none": 0}}
	got := scores(t, plugin(Pack, est), deployment(4, policyv1alpha1.ReplicaSchedulingTypeDivided),
		"roomy", "tight", "snug", "short", "shorter", "none", "unreachable")
	// Every cluster that runs all four above every one that does not, the
	// tighter the higher; the rest by how much they run.
	order := []string{"tight", "snug", "roomy", "short", "shorter", "none"}
	for i := 1; i < len(order); i++ {
		if got[order[i-1]] <= got[order[i]] {
			t.Errorf("pack: %s scored %d, not above %s's %d (%v)", order[i-1], got[order[i-1]], order[i], got[order[i]], got)
		}
	}
	if got["tight"] != framework.MaxClusterScore {
		t.Errorf("pack: an exact fit scored %d, want %d", got["tight"], framework.MaxClusterScore)
	}
	if got["unreachable"] != framework.MaxClusterScore/2 {
		t.Errorf("pack: a cluster without an answer scored %d, want the middle %d", got["unreachable"], framework.MaxClusterScore/2)
	}
}

func TestScorePackCountsWhatTheClusterRuns(t *testing.T) {
	// 4 replicas: "a" runs 2 of them and fits 2 more (room 4, an exact fit);
	// "b" runs none and fits 3: only "a" can run the whole workload.
	est := &fakeEstimator{fits: map[string]int32{"a": 2, "b": 3}}
	spec := deployment(4, policyv1alpha1.ReplicaSchedulingTypeDivided, workv1alpha2.TargetCluster{Name: "a", Replicas: 2})
	got := scores(t, plugin(Pack, est), spec, "a", "b")
	if got["a"] <= got["b"] {
		t.Errorf("pack: a (runs 2, fits 2 more) scored %d, not above b (fits 3) %d", got["a"], got["b"])
	}
}

func TestScoreSpread(t *testing.T) {
	est := &fakeEstimator{fits: map[string]int32{"roomy": 40, "tight": 4, "none": 0}}
	got := scores(t, plugin(Spread, est), deployment(4, policyv1alpha1.ReplicaSchedulingTypeDivided),
		"tight", "roomy", "none", "unreachable")
	want := map[string]int64{"roomy": 100, "tight": 10, "none": 0, "unreachable": 50}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("spread: %s scored %d, want %d (%v)", n, got[n], w, got)
		}
	}
}

func TestAsksOncePerAttemptAndNamesTheWorkload(t *testing.T) {
	est := &fakeEstimator{fits: map[string]int32{"a": 4}}
	p := plugin(Pack, est)
	spec := deployment(4, policyv1alpha1.ReplicaSchedulingTypeDivided)
	p.Filter(context.Background(), spec, nil, cluster("a"))
	p.Score(context.Background(), spec, cluster("a"))
	if est.asked != 1 {
		t.Errorf("Filter and Score of one attempt asked the estimator %d times, want 1", est.asked)
	}
	if len(est.objects) != 1 || est.objects[0] != "kind=Deployment, name=shop/web" {
		t.Errorf("the estimator was told the workload as %q, want karmada-scheduler's form %q", est.objects, "kind=Deployment, name=shop/web")
	}
	// A new version of the workload is a new question.
	spec.Resource.ResourceVersion = "8"
	p.Score(context.Background(), spec, cluster("a"))
	if est.asked != 2 {
		t.Errorf("a changed workload was answered from the cache (%d questions, want 2)", est.asked)
	}
}

func TestComponentSets(t *testing.T) {
	est := &fakeEstimator{fits: map[string]int32{"a": 0, "b": 2}}
	spec := deployment(0, policyv1alpha1.ReplicaSchedulingTypeDivided)
	spec.Components = []workv1alpha2.Component{{Name: "jobmanager", Replicas: 1}, {Name: "taskmanager", Replicas: 3}}
	p := plugin(Pack, est)
	if got := p.Filter(context.Background(), spec, nil, cluster("a")); got.Code() != framework.Unschedulable {
		t.Errorf("no whole set fits a: Filter = %v, want Unschedulable", got.Code())
	}
	if got := p.Filter(context.Background(), spec, nil, cluster("b")); !got.IsSuccess() {
		t.Errorf("two sets fit b: Filter = %v %v, want Success", got.Code(), got.Reasons())
	}
}

func TestArgs(t *testing.T) {
	for _, mode := range []string{Pack, Spread} {
		if err := (&Args{Score: mode}).Validate(); err != nil {
			t.Errorf("%s: %v", mode, err)
		}
	}
	err := (&Args{Score: "binpack"}).Validate()
	if err == nil {
		t.Fatal("--rebalancer-score=binpack accepted")
	}
	if _, ferr := Factory(&Args{Score: "binpack"})(); ferr == nil || ferr.Error() != err.Error() {
		t.Errorf("Factory with a bad mode: %v, want %v", ferr, err)
	}
}
