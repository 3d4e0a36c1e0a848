// Package rebalancerestimate is a Karmada scheduler plugin that chooses
// member clusters by what their estimators say the workload's replicas can
// really run: `rebalancer estimator` in each member places copies of the
// workload's pods with the member's own scheduler profile, so pod
// anti-affinity, topology spread, taints and node affinity count, where
// Karmada's general estimator sums resources.
//
// Filter drops a cluster that can run none of the replicas (a Duplicated
// workload: not all of them); Score ranks the rest, packing the workload onto
// the cluster it fills most tightly or spreading it onto the one with most
// room (--rebalancer-score). A cluster the binding already uses always
// passes: moving what runs is not this plugin's call. Without an answer (no
// estimator, an error, -1) the plugin has no opinion: the cluster passes and
// scores in the middle.
package rebalancerestimate

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/klog/v2"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	estimatorclient "github.com/karmada-io/karmada/pkg/estimator/client"
	"github.com/karmada-io/karmada/pkg/scheduler/framework"
	"github.com/karmada-io/karmada/pkg/util"
)

// Name is the plugin's name in karmada-scheduler's registry and --plugins.
const Name = "RebalancerEstimate"

// Score modes.
const (
	// Pack prefers the cluster whose room the workload fills most tightly
	// among those that can run all of it, then the one that runs most of it.
	Pack = "pack"
	// Spread prefers the cluster with most room for the workload.
	Spread = "spread"
)

// schedulerEstimator is the name karmada-scheduler registers the members'
// estimators under when --enable-scheduler-estimator is set.
const schedulerEstimator = "scheduler-estimator"

// answerTTL is how long an estimate is reused: Filter and Score of one
// scheduling attempt ask the same question of each cluster, and the answer
// must not outlive the attempt by much, since the members change.
const answerTTL = 5 * time.Second

// unknown is the raw score of a cluster without an estimate; NormalizeScore
// gives it the middle score.
const unknown = -1

// Args are the plugin's settings, taken as flags of the scheduler binary
// (karmada-scheduler has no per-plugin configuration file).
type Args struct {
	// Score is Pack or Spread.
	Score string
}

// AddFlags adds the plugin's flags to the scheduler's.
func (a *Args) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&a.Score, "rebalancer-score", Pack,
		"how "+Name+" ranks member clusters by their estimators' answers: "+Pack+
			" (the cluster the workload fills most tightly) or "+Spread+" (the cluster with most room)")
}

// Validate names a bad setting.
func (a *Args) Validate() error {
	if a.Score != Pack && a.Score != Spread {
		return fmt.Errorf("--rebalancer-score: %q is neither %q nor %q", a.Score, Pack, Spread)
	}
	return nil
}

// Factory builds the plugin from args, read when the scheduler starts (after
// its flags are parsed).
func Factory(args *Args) func() (framework.Plugin, error) {
	return func() (framework.Plugin, error) {
		if err := args.Validate(); err != nil {
			return nil, err
		}
		return New(args.Score, func() estimatorclient.ReplicaEstimator {
			return estimatorclient.GetReplicaEstimators()[schedulerEstimator]
		}), nil
	}
}

// Plugin is the Filter and Score plugin.
type Plugin struct {
	score string
	// estimator returns the members' estimators, or nil when the scheduler
	// runs without them; asked each time, since karmada-scheduler registers
	// them while it builds its framework.
	estimator func() estimatorclient.ReplicaEstimator
	answers   *cache.Expiring
	warnOnce  sync.Once
}

var (
	_ framework.FilterPlugin    = &Plugin{}
	_ framework.ScorePlugin     = &Plugin{}
	_ framework.ScoreExtensions = &Plugin{}
)

// New returns the plugin scoring by mode, asking estimator.
func New(mode string, estimator func() estimatorclient.ReplicaEstimator) *Plugin {
	return &Plugin{score: mode, estimator: estimator, answers: cache.NewExpiring()}
}

// Name returns the plugin's name.
func (p *Plugin) Name() string { return Name }

// Filter drops a cluster where the estimator fits none of the workload's
// replicas, or, for a Duplicated workload, fewer than all of them.
func (p *Plugin) Filter(ctx context.Context, spec *workv1alpha2.ResourceBindingSpec,
	_ *workv1alpha2.ResourceBindingStatus, cluster *clusterv1alpha1.Cluster) *framework.Result {
	if spec.TargetContains(cluster.Name) {
		return framework.NewResult(framework.Success)
	}
	fit, ok := p.fit(ctx, spec, cluster)
	if !ok {
		return framework.NewResult(framework.Success)
	}
	need := int64(1)
	if duplicated(spec) {
		need = int64(spec.Replicas)
	}
	if fit < need {
		return framework.NewResult(framework.Unschedulable,
			fmt.Sprintf("cluster(s) whose estimator fits fewer replicas than %d", need))
	}
	return framework.NewResult(framework.Success)
}

// Score is the cluster's rank by mode before normalisation: for Pack a score
// in [0, 100], for Spread the replicas the cluster can run; unknown without
// an answer.
func (p *Plugin) Score(ctx context.Context, spec *workv1alpha2.ResourceBindingSpec,
	cluster *clusterv1alpha1.Cluster) (int64, *framework.Result) {
	fit, ok := p.fit(ctx, spec, cluster)
	if !ok {
		return unknown, framework.NewResult(framework.Success)
	}
	// What the cluster could run of the workload: what it already runs and
	// what fits beside it.
	room := fit + int64(spec.AssignedReplicasForCluster(cluster.Name))
	if p.score == Spread {
		return room, framework.NewResult(framework.Success)
	}
	return packScore(room, need(spec)), framework.NewResult(framework.Success)
}

// packScore ranks a cluster with room for room replicas of a workload of
// need: one that runs all of it scores above every one that does not, the
// tighter the fit the higher (50, 100]; one that runs part of it scores
// [0, 50) by the part.
func packScore(room, need int64) int64 {
	half := framework.MaxClusterScore / 2
	if room >= need {
		return half + half*need/room
	}
	return half * room / need
}

// ScoreExtensions returns the normalisation.
func (p *Plugin) ScoreExtensions() framework.ScoreExtensions { return p }

// NormalizeScore puts the scores in [MinClusterScore, MaxClusterScore]:
// Spread's replica counts relative to the roomiest cluster; a cluster
// without an answer in the middle, so it neither wins nor loses by it.
func (p *Plugin) NormalizeScore(_ context.Context, scores framework.ClusterScoreList) *framework.Result {
	var most int64
	for _, s := range scores {
		most = max(most, s.Score)
	}
	for i := range scores {
		switch {
		case scores[i].Score == unknown:
			scores[i].Score = framework.MaxClusterScore / 2
		case p.score == Spread && most > 0:
			scores[i].Score = framework.MaxClusterScore * scores[i].Score / most
		case p.score == Spread:
			scores[i].Score = framework.MinClusterScore
		}
	}
	return framework.NewResult(framework.Success)
}

// need is how much of the workload a cluster would run alone: its replicas,
// or one whole set of a multi-component workload.
func need(spec *workv1alpha2.ResourceBindingSpec) int64 {
	if len(spec.Components) > 1 {
		return 1
	}
	return int64(spec.Replicas)
}

func duplicated(spec *workv1alpha2.ResourceBindingSpec) bool {
	return spec.Placement != nil && spec.Placement.ReplicaSchedulingType() == policyv1alpha1.ReplicaSchedulingTypeDuplicated
}

// fit asks the cluster's estimator how many more replicas (or component
// sets) of the workload it can run; false when there is no answer or no
// question (not a workload).
func (p *Plugin) fit(ctx context.Context, spec *workv1alpha2.ResourceBindingSpec, cluster *clusterv1alpha1.Cluster) (int64, bool) {
	sets := len(spec.Components) > 1
	if !sets && spec.Replicas == 0 {
		return 0, false
	}
	key := cluster.Name + "/" + string(spec.Resource.UID) + "/" + spec.Resource.ResourceVersion + "/" + strconv.Itoa(int(spec.Replicas))
	if v, ok := p.answers.Get(key); ok {
		return v.(int64), true
	}
	est := p.estimator()
	if est == nil {
		p.warnOnce.Do(func() {
			klog.InfoS("No scheduler estimators: " + Name + " has no opinion on any cluster; start the scheduler with --enable-scheduler-estimator")
		})
		return 0, false
	}
	// The workload's name reaches the estimator as karmada-scheduler's own
	// questions carry it, so the member estimates its pods, not only its
	// requests.
	ctx = context.WithValue(ctx, util.ContextKeyObject,
		fmt.Sprintf("kind=%s, name=%s/%s", spec.Resource.Kind, spec.Resource.Namespace, spec.Resource.Name))
	var answer int32
	if sets {
		res, err := est.MaxAvailableComponentSets(ctx, estimatorclient.ComponentSetEstimationRequest{
			Clusters: []*clusterv1alpha1.Cluster{cluster}, Components: spec.Components, Namespace: spec.Resource.Namespace,
		})
		if err != nil || len(res) != 1 {
			klog.V(2).InfoS("No estimate", "plugin", Name, "cluster", cluster.Name, "resource", klog.KRef(spec.Resource.Namespace, spec.Resource.Name), "err", err)
			return 0, false
		}
		answer = res[0].Sets
	} else {
		res, err := est.MaxAvailableReplicas(ctx, []*clusterv1alpha1.Cluster{cluster}, spec.ReplicaRequirements)
		if err != nil || len(res) != 1 {
			klog.V(2).InfoS("No estimate", "plugin", Name, "cluster", cluster.Name, "resource", klog.KRef(spec.Resource.Namespace, spec.Resource.Name), "err", err)
			return 0, false
		}
		answer = res[0].Replicas
	}
	if answer < 0 {
		return 0, false
	}
	p.answers.Set(key, int64(answer), answerTTL)
	klog.V(4).InfoS("Estimate", "plugin", Name, "cluster", cluster.Name, "resource", klog.KRef(spec.Resource.Namespace, spec.Resource.Name), "fits", answer)
	return int64(answer), true
}
