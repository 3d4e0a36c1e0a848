package rebalancerestimate

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/cache"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	estimatorclient "github.com/karmada-io/karmada/pkg/estimator/client"
	clusterlister "github.com/karmada-io/karmada/pkg/generated/listers/cluster/v1alpha1"
	schedcache "github.com/karmada-io/karmada/pkg/scheduler/cache"
	"github.com/karmada-io/karmada/pkg/scheduler/core"
	"github.com/karmada-io/karmada/pkg/scheduler/framework"
	frameworkplugins "github.com/karmada-io/karmada/pkg/scheduler/framework/plugins"
)

// member is a cluster as karmada-scheduler sees it: Deployments enabled and
// a resource summary (what Karmada's general estimator divides by) that is
// the same for every member, so only the plugin tells them apart.
func member(name string) *clusterv1alpha1.Cluster {
	c := cluster(name)
	c.Status.APIEnablements = []clusterv1alpha1.APIEnablement{{GroupVersion: "apps/v1",
		Resources: []clusterv1alpha1.APIResource{{Name: "deployments", Kind: "Deployment"}}}}
	c.Status.ResourceSummary = &clusterv1alpha1.ResourceSummary{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("128"), corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods: resource.MustParse("1000")}}
	return c
}

// schedule runs Karmada's generic scheduler, its in-tree plugins and this
// one, over the members and returns the clusters it suggests.
func schedule(t *testing.T, p *Plugin, spec *workv1alpha2.ResourceBindingSpec, members ...string) ([]workv1alpha2.TargetCluster, error) {
	t.Helper()
	clusters := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, m := range members {
		if err := clusters.Add(member(m)); err != nil {
			t.Fatal(err)
		}
	}
	registry := frameworkplugins.NewInTreeRegistry()
	if err := registry.Register(Name, func() (framework.Plugin, error) { return p, nil }); err != nil {
		t.Fatal(err)
	}
	sched, err := core.NewGenericScheduler(
		schedcache.NewCache(clusterlister.NewClusterLister(clusters), cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
		registry)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sched.Schedule(context.Background(), spec, &workv1alpha2.ResourceBindingStatus{}, &core.ScheduleAlgorithmOption{})
	return res.SuggestedClusters, err
}

// oneCluster is a workload Karmada places whole on one cluster of its
// choice: the highest-scored that can run it.
func oneCluster(replicas int32) *workv1alpha2.ResourceBindingSpec {
	spec := deployment(replicas, policyv1alpha1.ReplicaSchedulingTypeDivided)
	spec.Placement.SpreadConstraints = []policyv1alpha1.SpreadConstraint{{
		SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 1, MaxGroups: 1}}
	spec.Placement.ReplicaScheduling.ReplicaDivisionPreference = policyv1alpha1.ReplicaDivisionPreferenceWeighted
	spec.Placement.ReplicaScheduling.WeightPreference = &policyv1alpha1.ClusterPreferences{
		DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas}
	spec.ReplicaRequirements.ResourceRequest = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	return spec
}

func TestKarmadaChoosesTheClusterThePluginScores(t *testing.T) {
	// Both members look alike to Karmada; their estimators see that 4
	// replicas fill "member-b" exactly and "member-a" a tenth.
	est := &fakeEstimator{fits: map[string]int32{"member-a": 40, "member-b": 4}}
	for _, tc := range []struct{ mode, want string }{{Pack, "member-b"}, {Spread, "member-a"}} {
		t.Run(tc.mode, func(t *testing.T) {
			got, err := schedule(t, plugin(tc.mode, est), oneCluster(4), "member-a", "member-b")
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Name != tc.want || got[0].Replicas != 4 {
				t.Errorf("%s: Karmada placed %v, want all 4 replicas on %s", tc.mode, got, tc.want)
			}
		})
	}
}

func TestKarmadaSkipsTheClusterWhereNothingFits(t *testing.T) {
	// Spread would prefer "member-a", but none of the replicas fits there
	// (say, each needs a GPU it lacks): Karmada must not be offered it.
	est := &fakeEstimator{fits: map[string]int32{"member-a": 0, "member-b": 4}}
	got, err := schedule(t, plugin(Spread, est), oneCluster(4), "member-a", "member-b")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "member-b" {
		t.Errorf("Karmada placed %v, want all on member-b", got)
	}

	est.fits["member-b"] = 0
	_, err = schedule(t, plugin(Spread, est), oneCluster(4), "member-a", "member-b")
	var fit *framework.FitError
	if !errors.As(err, &fit) {
		t.Fatalf("no member fits a replica: Schedule returned %v, want a FitError", err)
	}
	if fit.NumAllClusters != 2 || len(fit.Diagnosis.ClusterToResultMap) != 2 {
		t.Errorf("FitError %q: want both clusters filtered out", fit.Error())
	}
}

// With no estimator answering, the plugin must leave Karmada's choice as it
// would be without it.
func TestNoOpinionChangesNothing(t *testing.T) {
	spec := oneCluster(4)
	without, err := schedule(t, New(Pack, func() estimatorclient.ReplicaEstimator { return nil }), spec, "member-a", "member-b")
	if err != nil {
		t.Fatal(err)
	}
	registryOnly, err := scheduleInTreeOnly(t, spec, "member-a", "member-b")
	if err != nil {
		t.Fatal(err)
	}
	if len(without) != 1 || len(registryOnly) != 1 || without[0] != registryOnly[0] {
		t.Errorf("with a plugin that has no answers Karmada placed %v, without the plugin %v", without, registryOnly)
	}
}

func scheduleInTreeOnly(t *testing.T, spec *workv1alpha2.ResourceBindingSpec, members ...string) ([]workv1alpha2.TargetCluster, error) {
	t.Helper()
	clusters := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, m := range members {
		if err := clusters.Add(member(m)); err != nil {
			t.Fatal(err)
		}
	}
	sched, err := core.NewGenericScheduler(
		schedcache.NewCache(clusterlister.NewClusterLister(clusters), cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
		frameworkplugins.NewInTreeRegistry())
	if err != nil {
		t.Fatal(err)
	}
	res, err := sched.Schedule(context.Background(), spec, &workv1alpha2.ResourceBindingStatus{}, &core.ScheduleAlgorithmOption{})
	return res.SuggestedClusters, err
}
