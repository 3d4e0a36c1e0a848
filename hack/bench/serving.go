package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/metadata"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/pkg/estimator"
	"github.com/rebalancer-dev/rebalancer/pkg/estimator/pb"
	"github.com/rebalancer-dev/rebalancer/pkg/extender"
	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/inputs"
	"github.com/rebalancer-dev/rebalancer/pkg/profile"
	"github.com/rebalancer-dev/rebalancer/pkg/session"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// benchPrioritize times count prioritize calls of rebalancer's extender at
// nodes nodes, as kube-scheduler makes them (one HTTP request through the
// handler: decode, score, encode), for a replacement whose predecessor's
// hint is in flight, the case where the extender scores. Value is the 99th
// percentile in milliseconds, Value2 the mean.
func benchPrioritize(ctx context.Context, nodes, count int) (measurement, error) {
	logger := klog.FromContext(ctx)
	book := hint.NewBook(clock.RealClock{}, time.Hour)
	ext := extender.New(logger, book, nil, func() bool { return true }, extender.NewMetrics(prometheus.NewRegistry(), book))
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("node-%04d", i)
	}
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs-web", Controller: ptr.To(true)}
	pod := func(name, node string, annotations map[string]string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), OwnerReferences: []metav1.OwnerReference{owner}, Annotations: annotations},
			Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "x"}}},
		}
	}
	h := hint.Hint{Source: names[0], Target: names[nodes-1], PlanID: "bench", Time: time.Now()}
	book.Leaving(logger, pod("old", names[0], h.Annotations()))
	body, err := json.Marshal(extenderv1.ExtenderArgs{Pod: pod("new", "", nil), NodeNames: &names})
	if err != nil {
		return measurement{}, err
	}
	took := make([]time.Duration, 0, count)
	start := time.Now()
	for range count {
		t0 := time.Now()
		rec := httptest.NewRecorder()
		ext.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, extender.PrioritizePath, bytes.NewReader(body)))
		took = append(took, time.Since(t0))
		if rec.Code != http.StatusOK {
			return measurement{}, fmt.Errorf("prioritize answered %d: %s", rec.Code, rec.Body.String())
		}
	}
	total := time.Since(start)
	slices.Sort(took)
	p99 := took[len(took)*99/100]
	return measurement{Seconds: total.Seconds(), Count: count,
		Value: float64(p99.Microseconds()) / 1000, Value2: total.Seconds() * 1000 / float64(count)}, nil
}

// benchEstimate times count MaxAvailableReplicas questions to `rebalancer
// estimator` at nodes nodes (the synthetic plan cluster, kube-scheduler's
// default profile, the default cap of 1,000 replicas), through its gRPC
// handler, one after the other, then count more from 8 callers at once.
// The questions take turns: replicas of five sizes built from the request;
// a Deployment of the cluster; one whose pods carry required pod
// anti-affinity to each other on the hostname; one whose pods carry a
// DoNotSchedule topology spread on the zone (see realWorkloads). Latency
// holds the p50, p99 and mean of the first run, the answers a second of
// the second, and the answers of -1 (past the budget) of both.
func benchEstimate(ctx context.Context, nodes, count int) (measurement, error) {
	snap, err := cluster(nodes)
	if err != nil {
		return measurement{}, err
	}
	plain, anti, spread := realWorkloads(snap, 10)
	if len(plain) == 0 || len(anti) == 0 || len(spread) == 0 {
		return measurement{}, fmt.Errorf("the synthetic cluster has too few Deployments (%d)", len(plain))
	}
	cfg, err := profile.Default()
	if err != nil {
		return measurement{}, err
	}
	// The default profile places the replicas built from requests, and
	// under the synthetic pods' own scheduler name, theirs.
	profiles := []*config.KubeSchedulerProfile{&cfg.Profiles[0]}
	for _, pod := range snap.Pods {
		if name := pod.Spec.SchedulerName; !slices.ContainsFunc(profiles, func(p *config.KubeSchedulerProfile) bool { return p.SchedulerName == name }) {
			p := cfg.Profiles[0]
			p.SchedulerName = name
			profiles = append(profiles, &p)
		}
	}
	est := estimator.New(estimator.Options{MaxReplicas: 1000, Workers: benchWorkers()}, session.New(session.Options{}), &inputs.Inputs{Schedulers: profiles})
	if err := est.Update(ctx, snap); err != nil {
		return measurement{}, err
	}
	srv := estimator.NewServer(klog.FromContext(ctx), est, estimator.DefaultBudget, "", nil)
	sizes := [][2]string{{"100m", "128Mi"}, {"500m", "512Mi"}, {"1", "2Gi"}, {"2", "4Gi"}, {"4", "8Gi"}}
	ask := func(i int) (time.Duration, bool, error) {
		size := sizes[i%len(sizes)]
		requests := map[string][]byte{}
		for name, q := range map[string]string{"cpu": size[0], "memory": size[1]} {
			quantity := resource.MustParse(q)
			b, err := quantity.Marshal()
			if err != nil {
				return 0, false, err
			}
			requests[name] = b
		}
		qctx := ctx
		if named := [][]string{nil, plain, anti, spread}[i%4]; named != nil {
			qctx = metadata.NewIncomingContext(ctx, metadata.Pairs(estimator.ObjectKey, "kind=Deployment, name="+named[(i/4)%len(named)]))
		}
		t0 := time.Now()
		res, err := srv.MaxAvailableReplicas(qctx, &pb.MaxAvailableReplicasRequest{ReplicaRequirements: &pb.ReplicaRequirements{
			Namespace: "default", ResourceRequestBytes: requests}})
		if err != nil {
			return 0, false, fmt.Errorf("question %d: %w", i, err)
		}
		return time.Since(t0), res.GetMaxReplicas() == estimator.NoOpinion, nil
	}
	var lat LatencyResult
	took := make([]time.Duration, 0, count)
	start := time.Now()
	for i := range count {
		d, none, err := ask(i)
		if err != nil {
			return measurement{}, err
		}
		took = append(took, d)
		if none {
			lat.NoOpinion++
		}
	}
	total := time.Since(start)
	slices.Sort(took)
	ms := func(d time.Duration) float64 { return round(float64(d.Microseconds())/1000, 2) }
	lat.P50Ms, lat.P99Ms, lat.MeanMs, lat.Calls = ms(took[len(took)/2]), ms(took[len(took)*99/100]), round(total.Seconds()*1000/float64(count), 2), count

	// The same questions from 8 callers at once.
	const callers = 8
	var next, none atomic.Int64
	errs := make(chan error, callers)
	start = time.Now()
	for range callers {
		go func() {
			for i := int(next.Add(1)) - 1; i < count; i = int(next.Add(1)) - 1 {
				_, no, err := ask(i)
				if err != nil {
					errs <- err
					return
				}
				if no {
					none.Add(1)
				}
			}
			errs <- nil
		}()
	}
	for range callers {
		if err := <-errs; err != nil {
			return measurement{}, err
		}
	}
	lat.AnswersPerS = round(float64(count)/time.Since(start).Seconds(), 1)
	lat.NoOpinion += int(none.Load())
	return measurement{Seconds: total.Seconds(), Count: count, Value: lat.P99Ms, Value2: lat.MeanMs, Latency: &lat}, nil
}

// realWorkloads makes the synthetic cluster's ReplicaSets Deployments'
// (their pods get the pod-template-hash label their names end in, as the
// Deployment controller sets it, so the estimator finds the Deployment)
// and returns Deployments of it ("namespace/name") of three kinds: plain
// ones; n whose pods now require pod anti-affinity to each other on the
// hostname; n whose pods now spread over the zones, DoNotSchedule, maxSkew
// 1. Only Deployments of small pods (at most 500m) are picked, so that
// their answers reach the cap or the constraint, not the resources.
func realWorkloads(snap *snapshot.Snapshot, n int) (plain, anti, spread []string) {
	labels := map[types.UID]map[string]string{}
	kinds := map[types.UID]int{}
	for _, pod := range snap.Pods {
		ref := metav1.GetControllerOfNoCopy(pod)
		if ref == nil || ref.Kind != "ReplicaSet" || pod.Labels["app"] == "" || !strings.HasPrefix(ref.Name, pod.Labels["app"]+"-") {
			continue
		}
		l, seen := labels[ref.UID]
		if !seen {
			l = maps.Clone(pod.Labels)
			l[appsv1.DefaultDeploymentUniqueLabelKey] = strings.TrimPrefix(ref.Name, pod.Labels["app"]+"-")
			labels[ref.UID] = l
			name := pod.Namespace + "/" + pod.Labels["app"]
			small := pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() <= 500
			switch {
			case small && len(anti) < n && len(anti) <= len(spread):
				kinds[ref.UID] = 1
				anti = append(anti, name)
			case small && len(spread) < n:
				kinds[ref.UID] = 2
				spread = append(spread, name)
			default:
				plain = append(plain, name)
			}
		}
		pod.Labels = l
		selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": l["app"]}}
		switch kinds[ref.UID] {
		case 1:
			pod.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{LabelSelector: selector, TopologyKey: v1.LabelHostname}},
			}}
		case 2:
			pod.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: selector,
			}}
		}
	}
	return plain, anti, spread
}

// benchWorkers are the estimator's simulations in benchEstimate: one, as
// `rebalancer estimator` runs by default (BENCH_ESTIMATOR_WORKERS
// overrides it; on 2 cores a second answers no faster, the filter passes
// already using both).
func benchWorkers() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_ESTIMATOR_WORKERS")); err == nil && n > 0 {
		return n
	}
	return 1
}
