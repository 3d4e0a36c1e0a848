package estimator

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
)

// Templates are the pod templates of the Deployments, StatefulSets,
// ReplicaSets and Jobs of one API server, read through informers and
// looked up in their caches: an answer makes no request. A workload's
// template is its replicas' truth, also before it runs a pod (scaled to
// zero, or not propagated yet) and while a rollout changes it.
//
// The estimator keeps two: the member cluster's own workloads (live), and
// Karmada's resource templates, which karmada-apiserver serves as ordinary
// Kubernetes APIs (--karmada-kubeconfig).
type Templates struct {
	factory      informers.SharedInformerFactory
	deployments  appslisters.DeploymentLister
	statefulSets appslisters.StatefulSetLister
	replicaSets  appslisters.ReplicaSetLister
	jobs         batchlisters.JobLister
	synced       []cache.InformerSynced
}

// NewTemplates reads the workloads' templates of the API server of client
// once Start is called; only those four kinds are watched.
func NewTemplates(client kubernetes.Interface) *Templates {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(slim))
	apps, batch := f.Apps().V1(), f.Batch().V1()
	t := &Templates{
		factory:      f,
		deployments:  apps.Deployments().Lister(),
		statefulSets: apps.StatefulSets().Lister(),
		replicaSets:  apps.ReplicaSets().Lister(),
		jobs:         batch.Jobs().Lister(),
	}
	for _, i := range []cache.SharedIndexInformer{apps.Deployments().Informer(), apps.StatefulSets().Informer(), apps.ReplicaSets().Informer(), batch.Jobs().Informer()} {
		t.synced = append(t.synced, i.HasSynced)
	}
	return t
}

// slim drops what no answer reads from the cached workloads: their
// managed fields and annotations (kubectl's last-applied configuration
// copies the whole object); the pod template is kept whole.
func slim(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		m.SetAnnotations(nil)
	}
	return obj, nil
}

// Start starts the informers, which stop when ctx ends; nil Templates
// start nothing.
func (t *Templates) Start(ctx context.Context) {
	if t != nil {
		t.factory.Start(ctx.Done())
	}
}

// Shutdown waits for the informers Start started, once ctx has ended.
func (t *Templates) Shutdown() {
	if t != nil {
		t.factory.Shutdown()
	}
}

// HasSynced says whether each informer has listed its kind; nil
// Templates have.
func (t *Templates) HasSynced() bool {
	if t == nil {
		return true
	}
	for _, synced := range t.synced {
		if !synced() {
			return false
		}
	}
	return true
}

// WaitForSync waits until HasSynced, or ctx ends (an error).
func (t *Templates) WaitForSync(ctx context.Context) error {
	if t == nil || cache.WaitForCacheSync(ctx.Done(), t.synced...) {
		return nil
	}
	return fmt.Errorf("the workloads' templates were not read: %w", context.Cause(ctx))
}

// Template is a copy of the pod template of the workload w names, nil
// when the API server has no such workload (or of a kind not watched).
func (t *Templates) Template(w workload) (*v1.PodTemplateSpec, error) {
	if t == nil {
		return nil, nil
	}
	var tmpl *v1.PodTemplateSpec
	var err error
	switch w.kind {
	case "Deployment":
		tmpl, err = lookup(t.deployments.Deployments(w.namespace), w.name, func(o *appsv1.Deployment) *v1.PodTemplateSpec { return &o.Spec.Template })
	case "StatefulSet":
		tmpl, err = lookup(t.statefulSets.StatefulSets(w.namespace), w.name, func(o *appsv1.StatefulSet) *v1.PodTemplateSpec { return &o.Spec.Template })
	case "ReplicaSet":
		tmpl, err = lookup(t.replicaSets.ReplicaSets(w.namespace), w.name, func(o *appsv1.ReplicaSet) *v1.PodTemplateSpec { return &o.Spec.Template })
	case "Job":
		tmpl, err = lookup(t.jobs.Jobs(w.namespace), w.name, func(o *batchv1.Job) *v1.PodTemplateSpec { return &o.Spec.Template })
	default:
		return nil, nil
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the pod template of %s: %w", w, err)
	}
	return tmpl.DeepCopy(), nil // the cache's own is shared
}

// lookup is the pod template of the cached workload name, which lister
// holds.
func lookup[T any](lister interface{ Get(string) (T, error) }, name string, template func(T) *v1.PodTemplateSpec) (*v1.PodTemplateSpec, error) {
	o, err := lister.Get(name)
	if err != nil {
		return nil, err
	}
	return template(o), nil
}
