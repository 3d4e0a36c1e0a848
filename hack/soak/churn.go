package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/hack/internal/harness"
)

const (
	burstLabel    = "soak.rebalancer.dev/burst"
	revisionAnnot = "soak.rebalancer.dev/revision"
)

// churner carries out a schedule's actions.
type churner struct {
	c    kubernetes.Interface
	seed uint64
	base []Workload
	// pods lists the run's pods when an action picks one.
	pods func() []*v1.Pod
}

func namespaceOf(i int) string { return namespaces[i%len(namespaces)] }

func deployment(ns string, w Workload, labels map[string]string) *appsv1.Deployment {
	sel := map[string]string{"app": w.Name}
	podLabels := map[string]string{"app": w.Name}
	scheduler := "rebalancer-scheduler"
	if w.DefaultScheduler {
		scheduler = v1.DefaultSchedulerName
	}
	requests := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(w.CPUMilli, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(w.MemMiB<<20, resource.BinarySI),
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(w.Replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: v1.PodSpec{
					SchedulerName: scheduler,
					NodeSelector:  map[string]string{nodeLabel: "true"},
					Tolerations:   []v1.Toleration{{Key: harness.KWOKTaint, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}},
					// KWOK pods stop at once; the default 30 s would keep
					// evicted pods' requests on their nodes for nothing.
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
						Resources: v1.ResourceRequirements{Requests: requests}}},
				},
			},
		},
	}
}

// burstWorkloads are the extra Deployments of burst k (k > 0).
func (ch *churner) burstWorkloads(k, count int) []Workload {
	rng := rand.New(rand.NewPCG(ch.seed, 100+uint64(k)))
	out := make([]Workload, count)
	for i := range out {
		size := podSizes[rng.IntN(len(podSizes))]
		out[i] = Workload{Name: fmt.Sprintf("burst-%d-%03d", k, i), Replicas: 1 + rng.IntN(5), CPUMilli: size.cpu, MemMiB: size.mem}
	}
	return out
}

func (ch *churner) do(ctx context.Context, a Action) error {
	switch a.Kind {
	case phaseBurst:
		if a.Workload == 0 {
			for i, w := range ch.base {
				if err := ch.create(ctx, deployment(namespaceOf(i), w, nil)); err != nil {
					return err
				}
			}
			return nil
		}
		// The previous burst's Deployments go as the next ones come.
		prev := metav1.ListOptions{LabelSelector: burstLabel + "=" + strconv.Itoa(a.Workload-1)}
		for _, ns := range namespaces {
			if err := ch.c.AppsV1().Deployments(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, prev); err != nil {
				return err
			}
		}
		for i, w := range ch.burstWorkloads(a.Workload, a.Replicas) {
			if err := ch.create(ctx, deployment(namespaceOf(i), w, map[string]string{burstLabel: strconv.Itoa(a.Workload)})); err != nil {
				return err
			}
		}
	case phaseScale:
		w := ch.base[a.Workload]
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, a.Replicas)
		_, err := ch.c.AppsV1().Deployments(namespaceOf(a.Workload)).Patch(ctx, w.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	case phaseRollout:
		w := ch.base[a.Workload]
		patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, revisionAnnot, strconv.FormatUint(a.Pick, 36))
		_, err := ch.c.AppsV1().Deployments(namespaceOf(a.Workload)).Patch(ctx, w.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	case phaseCrash:
		pods := ch.pods()
		if len(pods) == 0 {
			return nil
		}
		slices.SortFunc(pods, func(a, b *v1.Pod) int {
			return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
		})
		p := pods[a.Pick%uint64(len(pods))]
		err := ch.c.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return nil
}

func (ch *churner) create(ctx context.Context, d *appsv1.Deployment) error {
	_, err := ch.c.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
