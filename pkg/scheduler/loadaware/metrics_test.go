package loadaware

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
)

func TestMetricsSource(t *testing.T) {
	sampled := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	owned := func(name string, created time.Time) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: metav1.NewTime(created),
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web", UID: "rs-web", Controller: ptr(true)}}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}}}}
	}
	old1, old2 := owned("web-1", sampled.Add(-time.Hour)), owned("web-2", sampled.Add(-time.Hour))
	fresh := owned("web-3", sampled.Add(time.Minute)) // after the sample: not in it
	usage := func(cpu string) v1.ResourceList {
		return v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("100Mi")}
	}
	// Added under the resources the client lists (the fake would file
	// them under the kinds' plural, nodemetricses).
	metrics := metricsfake.NewSimpleClientset()
	for _, o := range []struct {
		resource string
		obj      runtime.Object
		ns       string
	}{
		{"nodes", &metricsv1beta1.NodeMetrics{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Timestamp: metav1.NewTime(sampled), Usage: usage("2")}, ""},
		{"pods", &metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default"}, Timestamp: metav1.NewTime(sampled),
			Containers: []metricsv1beta1.ContainerMetrics{{Name: "c", Usage: usage("600m")}}}, "default"},
		{"pods", &metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: "web-2", Namespace: "default"}, Timestamp: metav1.NewTime(sampled),
			Containers: []metricsv1beta1.ContainerMetrics{{Name: "c", Usage: usage("400m")}}}, "default"},
	} {
		if err := metrics.Tracker().Create(metricsv1beta1.SchemeGroupVersion.WithResource(o.resource), o.obj, o.ns); err != nil {
			t.Fatal(err)
		}
	}
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	for _, p := range []*v1.Pod{old1, old2, fresh} {
		if err := factory.Core().V1().Pods().Informer().GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	src := NewMetricsSource(metrics, factory.Core().V1().Pods().Lister())
	if _, ok := src.NodeLoad(nodeInfo("n1", "4", "16Gi")); ok {
		t.Error("a node's load is known before the first poll")
	}
	if got := src.Estimate(fresh); got.MilliCPU != 100 {
		t.Errorf("before the first poll a pod is estimated by its requests, got %v", got)
	}
	if err := src.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := src.Estimate(fresh); got.MilliCPU != 500 || got.Memory != 100<<20 {
		t.Errorf("estimate %+v, want the owner's mean 500m/100Mi", got)
	}
	other := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID("x")}}
	if got := src.Estimate(other); got.MilliCPU != 0 {
		t.Errorf("a pod without owner or requests is estimated %+v", got)
	}
	got, ok := src.NodeLoad(nodeInfo("n1", "4", "16Gi", old1, old2, fresh))
	if !ok || got.MilliCPU != 2500 {
		t.Errorf("n1 load %+v (%v), want its sample 2000m plus the estimate of the pod created since, 500m", got, ok)
	}
}

func ptr[T any](v T) *T { return &v }
