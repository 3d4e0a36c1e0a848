package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/metadata"
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
// handler: replicas of five sizes built from the request, and every third
// question a workload of the cluster, read from its newest pod. Value is
// the 99th percentile in milliseconds, Value2 the mean; an answer of -1
// (no opinion) is an error.
func benchEstimate(ctx context.Context, nodes, count int) (measurement, error) {
	snap, err := cluster(nodes)
	if err != nil {
		return measurement{}, err
	}
	cfg, err := profile.Default()
	if err != nil {
		return measurement{}, err
	}
	est := estimator.New(estimator.Options{MaxReplicas: 1000}, session.New(session.Options{}), &inputs.Inputs{Schedulers: []*config.KubeSchedulerProfile{&cfg.Profiles[0]}})
	if err := est.Update(ctx, snap); err != nil {
		return measurement{}, err
	}
	srv := estimator.NewServer(klog.FromContext(ctx), est, estimator.DefaultBudget, "", nil)
	var objects []string
	for _, pod := range snap.Pods {
		if deployment, ok := hint.DeploymentOf(pod); ok && len(objects) < 50 {
			objects = append(objects, fmt.Sprintf("kind=Deployment, name=%s/%s", pod.Namespace, deployment))
		}
	}
	sizes := [][2]string{{"100m", "128Mi"}, {"500m", "512Mi"}, {"1", "2Gi"}, {"2", "4Gi"}, {"4", "8Gi"}}
	took := make([]time.Duration, 0, count)
	start := time.Now()
	for i := range count {
		size := sizes[i%len(sizes)]
		requests := map[string][]byte{}
		for name, q := range map[string]string{"cpu": size[0], "memory": size[1]} {
			quantity := resource.MustParse(q)
			b, err := quantity.Marshal()
			if err != nil {
				return measurement{}, err
			}
			requests[name] = b
		}
		qctx := ctx
		if i%3 == 0 && len(objects) > 0 {
			qctx = metadata.NewIncomingContext(ctx, metadata.Pairs(estimator.ObjectKey, objects[i%len(objects)]))
		}
		t0 := time.Now()
		res, err := srv.MaxAvailableReplicas(qctx, &pb.MaxAvailableReplicasRequest{ReplicaRequirements: &pb.ReplicaRequirements{
			Namespace: "default", ResourceRequestBytes: requests}})
		took = append(took, time.Since(t0))
		if err != nil || res.GetMaxReplicas() == estimator.NoOpinion {
			return measurement{}, fmt.Errorf("question %d: no estimate (%v)", i, err)
		}
	}
	total := time.Since(start)
	slices.Sort(took)
	p99 := took[len(took)*99/100]
	return measurement{Seconds: total.Seconds(), Count: count,
		Value: float64(p99.Microseconds()) / 1000, Value2: total.Seconds() * 1000 / float64(count)}, nil
}
