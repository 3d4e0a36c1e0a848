package estimator

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
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
// Kubernetes APIs (--karmada-kubeconfig), read through (ReadThrough).
type Templates struct {
	factory informers.SharedInformerFactory
	kinds   map[string]templateSource
	synced  []cache.InformerSynced
	// readThrough: a workload the caches do not hold is read from the API
	// server.
	readThrough bool
}

// templateSource finds the pod template of a workload of one kind: in the
// informer's cache, or from the API server.
type templateSource struct {
	cached func(namespace, name string) (*v1.PodTemplateSpec, error)
	get    func(ctx context.Context, namespace, name string) (*v1.PodTemplateSpec, error)
}

// sourceOf is the templateSource of a kind whose lister and client are
// given, template the field of its objects that holds the pod template.
func sourceOf[T any, L interface{ Get(string) (T, error) }](
	lister func(namespace string) L,
	get func(ctx context.Context, namespace, name string, o metav1.GetOptions) (T, error),
	template func(T) *v1.PodTemplateSpec) templateSource {
	return templateSource{
		cached: func(namespace, name string) (*v1.PodTemplateSpec, error) {
			o, err := lister(namespace).Get(name)
			if err != nil {
				return nil, err
			}
			return template(o), nil
		},
		get: func(ctx context.Context, namespace, name string) (*v1.PodTemplateSpec, error) {
			o, err := get(ctx, namespace, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return template(o), nil
		},
	}
}

// NewTemplates reads the workloads' templates of the API server of client
// once Start is called; only those four kinds are watched.
func NewTemplates(client kubernetes.Interface) *Templates {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(slim))
	apps, batch := f.Apps().V1(), f.Batch().V1()
	deployments, statefulSets, replicaSets, jobs := apps.Deployments(), apps.StatefulSets(), apps.ReplicaSets(), batch.Jobs()
	t := &Templates{factory: f, kinds: map[string]templateSource{
		"Deployment": sourceOf(deployments.Lister().Deployments,
			func(ctx context.Context, ns, name string, o metav1.GetOptions) (*appsv1.Deployment, error) {
				return client.AppsV1().Deployments(ns).Get(ctx, name, o)
			}, func(o *appsv1.Deployment) *v1.PodTemplateSpec { return &o.Spec.Template }),
		"StatefulSet": sourceOf(statefulSets.Lister().StatefulSets,
			func(ctx context.Context, ns, name string, o metav1.GetOptions) (*appsv1.StatefulSet, error) {
				return client.AppsV1().StatefulSets(ns).Get(ctx, name, o)
			}, func(o *appsv1.StatefulSet) *v1.PodTemplateSpec { return &o.Spec.Template }),
		"ReplicaSet": sourceOf(replicaSets.Lister().ReplicaSets,
			func(ctx context.Context, ns, name string, o metav1.GetOptions) (*appsv1.ReplicaSet, error) {
				return client.AppsV1().ReplicaSets(ns).Get(ctx, name, o)
			}, func(o *appsv1.ReplicaSet) *v1.PodTemplateSpec { return &o.Spec.Template }),
		"Job": sourceOf(jobs.Lister().Jobs,
			func(ctx context.Context, ns, name string, o metav1.GetOptions) (*batchv1.Job, error) {
				return client.BatchV1().Jobs(ns).Get(ctx, name, o)
			}, func(o *batchv1.Job) *v1.PodTemplateSpec { return &o.Spec.Template }),
	}}
	for _, i := range []cache.SharedIndexInformer{deployments.Informer(), statefulSets.Informer(), replicaSets.Informer(), jobs.Informer()} {
		t.synced = append(t.synced, i.HasSynced)
	}
	return t
}

// ReadThrough makes Template read a workload its caches do not hold from
// the API server: Karmada asks about a workload the moment its resource
// template is created, often before the watch has delivered it, and an
// answer from the request alone would have Karmada divide its replicas by
// resources alone. Only a workload missing from the caches costs a request.
func (t *Templates) ReadThrough() *Templates {
	t.readThrough = true
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
func (t *Templates) Template(ctx context.Context, w workload) (*v1.PodTemplateSpec, error) {
	if t == nil {
		return nil, nil
	}
	src, ok := t.kinds[w.kind]
	if !ok {
		return nil, nil
	}
	tmpl, err := src.cached(w.namespace, w.name)
	if apierrors.IsNotFound(err) && t.readThrough {
		tmpl, err = src.get(ctx, w.namespace, w.name)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the pod template of %s: %w", w, err)
	}
	return tmpl.DeepCopy(), nil // the cache's own is shared
}
