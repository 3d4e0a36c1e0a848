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
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/pkg/extender"
	"github.com/rebalancer-dev/rebalancer/pkg/hint"
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
