// Package estimator answers Karmada's replica estimator API
// (karmada-scheduler-estimator's gRPC service) for the cluster it runs in,
// by simulation: how many more replicas of a workload fit is found by
// placing copies of its pod, one by one, with the cluster's own scheduler
// profile, in a fork of rebalancer's simulated cluster, until one finds no
// node (or counting them in one filter pass, where the way they meet has a
// closed form: Simulator.CountCopies). Inter-pod affinity and anti-affinity, topology spread, taints,
// node affinity, DRA devices and the profile's own filters all count, as
// they do when the replicas are created; a count of free resources per
// node counts none of them.
package estimator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/rebalancer-dev/rebalancer/pkg/estimator/pb"
	"github.com/rebalancer-dev/rebalancer/pkg/inputs"
	"github.com/rebalancer-dev/rebalancer/pkg/makeroom"
	"github.com/rebalancer-dev/rebalancer/pkg/session"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// Options configure an Estimator.
type Options struct {
	// MaxReplicas caps an answer: the copies placed per question (an
	// answer of MaxReplicas means at least that many).
	MaxReplicas int32
	// SchedulerName places the replicas built from a request's
	// requirements (a workload the cluster has no pod of yet).
	SchedulerName string
	// Templates, when set, are the member cluster's own workloads (live):
	// the replicas of a workload a question names are its template's.
	// Without it (offline), or for a workload it does not have, they are
	// the workload's newest pod's.
	Templates *Templates
	// Karmada, when set, are the resource templates of Karmada's control
	// plane: a workload the member has neither a template nor a pod of
	// (one Karmada is about to propagate) is estimated from its template
	// there. Without it, or for a workload it does not have either,
	// replicas are built from the request's requirements alone.
	Karmada *Templates
	// Workers are the simulations of the cluster each read opens, each
	// answering one question at a time (0: one): questions asked at once
	// are answered in parallel, each simulation costing the memory of one.
	Workers int
}

// Estimator answers from the latest simulations of the cluster that Update
// (or Run, live) gave it, Options.Workers questions at a time: a
// simulation is not safe for concurrent use, so each answer takes one of
// them, forks it and reverts the fork.
type Estimator struct {
	o Options
	// sess opens each simulation and plans on it, as `rebalancer plan`
	// does; in are what it opens: the schedulers' profiles and extenders
	// and, when set, the DeschedulerPolicy the cluster's rebalancer runs
	// (each read plans it, and a pending pod it makes room for, MakeRoom,
	// is not counted unschedulable).
	sess *session.Session
	in   *inputs.Inputs
	mu   sync.Mutex // held while the view is read or replaced
	view *view
}

// view is one read of the cluster, its simulations and what is looked up
// in it.
type view struct {
	// free are the simulations no answer has taken; broken is closed when
	// one can no longer be trusted (the view is dropped).
	free     chan *worker
	broken   chan struct{}
	breaking sync.Once
	// answering counts the answers under way, which the view's
	// simulations run until they end.
	answering sync.WaitGroup
	stop      context.CancelFunc // stops the simulations' informers
	// pods of each workload, bound or pending.
	pods    map[workload][]*v1.Pod
	classes map[string]int32 // PriorityClass values by name
	// rooms are the pending pods ("namespace/name") the policy's plan
	// makes room for.
	rooms sets.Set[string]
	// warnings are what the session said of the read: an extender that
	// does not answer, a webhook that cannot be counted on, usage that
	// cannot be read.
	warnings []string
}

// worker is one simulation of a view, and what an answer keeps of it.
type worker struct {
	sim *simulator.Simulator
	seq int // names the copies placed, each apart
	// random breaks the scheduler's ties; reseeded for every answer, so
	// that the same cluster gets the same answer.
	random *rand.Rand
}

// answer is one answer under way: the view, and the simulation it took.
type answer struct {
	*view
	*worker
}

// New returns an Estimator that simulates in (in.Schedulers, and
// in.Extenders and in.Policy when set; in.Snapshot is not read) through
// sess: each simulation models the extenders, the webhook's opt-in and
// the usage window as sess models them for a plan. It answers once Update
// (or Run) has given it the cluster.
func New(o Options, sess *session.Session, in *inputs.Inputs) *Estimator {
	if o.SchedulerName == "" {
		o.SchedulerName = v1.DefaultSchedulerName
	}
	o.Workers = max(o.Workers, 1)
	return &Estimator{o: o, sess: sess, in: in}
}

// Validate refuses options no answer could come of: a SchedulerName none
// of profiles models, whose replicas, built from every request for a
// workload the cluster has no pod of, would all be answered -1.
func (o Options) Validate(profiles []*config.KubeSchedulerProfile) error {
	name := o.SchedulerName
	if name == "" {
		name = v1.DefaultSchedulerName
	}
	names := make([]string, 0, len(profiles))
	for _, p := range profiles {
		if p.SchedulerName == name {
			return nil
		}
		names = append(names, strconv.Quote(p.SchedulerName))
	}
	return fmt.Errorf("--scheduler-name %q: no profile of that name is modelled, only %s", name, strings.Join(names, ", "))
}

// ErrNotReady is the answer before the first Update.
var ErrNotReady = errors.New("the cluster has not been read yet")

// Update replaces the simulation with one of snap, opened as the session
// opens a snapshot file. The new one is built before the old one is let
// go, so questions are answered meanwhile; the old one's informers stop
// then (each simulation runs its own until its context ends).
func (e *Estimator) Update(ctx context.Context, snap *snapshot.Snapshot) error {
	_, err := e.open(ctx, snap, nil)
	return err
}

// open opens snap, or the cluster read shows when snap is nil, through the
// session, plans the policy on it and makes it the view.
func (e *Estimator) open(ctx context.Context, snap *snapshot.Snapshot, read session.View) (*snapshot.Snapshot, error) {
	in := *e.in
	in.Snapshot = snap
	opened, err := e.sess.OpenLoaded(ctx, &in, read)
	if err != nil {
		return nil, err
	}
	snap = opened.Snapshot
	ctx, stop := context.WithCancel(ctx)
	sim, err := e.sess.Simulate(ctx, opened, snap)
	if err != nil {
		stop()
		return nil, err
	}
	v := &view{free: make(chan *worker, e.o.Workers), broken: make(chan struct{}), stop: stop,
		pods: map[workload][]*v1.Pod{}, classes: map[string]int32{}, rooms: sets.New[string](), warnings: opened.Warnings}
	v.free <- &worker{sim: sim}
	if in.Policy != nil {
		// The rooms the cluster's rebalancer would make now; the plan
		// leaves the simulation as it found it.
		opts := e.sess.Options().Planner
		opts.ID, opts.AllowConflicting = "estimator", true
		p, err := e.sess.PlanOn(ctx, opened, sim, opts)
		if err != nil {
			stop()
			return nil, fmt.Errorf("planning the policy: %w", err)
		}
		for _, m := range p.Moves {
			if m.Room != "" {
				v.rooms.Insert(m.Room)
			}
		}
	}
	for _, pod := range snap.Pods {
		for _, w := range workloadsOf(pod) {
			v.pods[w] = append(v.pods[w], pod)
		}
	}
	for _, pc := range snap.PriorityClasses {
		v.classes[pc.Name] = pc.Value
	}
	for range e.o.Workers - 1 {
		// The others, each a simulation of its own of the same read.
		sim, err := e.sess.Simulate(ctx, opened, snap)
		if err != nil {
			stop()
			return nil, err
		}
		v.free <- &worker{sim: sim}
	}
	e.mu.Lock()
	if e.view == nil || !slices.Equal(e.view.warnings, v.warnings) {
		// Said when they change, not at every read.
		for _, w := range v.warnings {
			klog.FromContext(ctx).Info("Warning: " + w)
		}
	}
	e.replace(v)
	e.mu.Unlock()
	return snap, nil
}

// replace makes v the view (nil: none) and stops the one it replaces once
// its answers under way have ended; the caller holds mu.
func (e *Estimator) replace(v *view) {
	if old := e.view; old != nil {
		go func() {
			old.answering.Wait()
			old.stop()
		}()
	}
	e.view = v
}

// Start starts reading the templates of Options.Templates and
// Options.Karmada, until ctx ends; Shutdown waits for their informers
// then.
func (e *Estimator) Start(ctx context.Context) {
	e.o.Templates.Start(ctx)
	e.o.Karmada.Start(ctx)
}

// Shutdown waits for the informers Start started, once its context has
// ended.
func (e *Estimator) Shutdown() {
	e.o.Templates.Shutdown()
	e.o.Karmada.Shutdown()
}

// Ready says whether the cluster has been read and its workloads'
// templates listed. Karmada's control plane is not waited for: it is asked
// only about workloads the member does not run, which are answered no
// opinion until its templates are listed.
func (e *Estimator) Ready() bool {
	if !e.o.Templates.HasSynced() {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.view != nil
}

// with runs fn on the current view, in a fork of one of its simulations,
// the first one free, that is reverted after.
func (e *Estimator) with(ctx context.Context, fn func(*answer) error) error {
	e.mu.Lock()
	v := e.view
	if v != nil {
		v.answering.Add(1)
	}
	e.mu.Unlock()
	if v == nil {
		return ErrNotReady
	}
	defer v.answering.Done()
	var w *worker
	select {
	case w = <-v.free:
	case <-v.broken:
		return ErrNotReady
	case <-ctx.Done():
		return fmt.Errorf("waiting for the simulation: %w", context.Cause(ctx))
	}
	f := w.sim.Fork()
	w.random = rand.New(rand.NewPCG(1, 1))
	err := fn(&answer{view: v, worker: w})
	if rerr := w.sim.Revert(f); rerr != nil {
		// The simulation can no longer be trusted: drop the view until
		// the next Update.
		v.breaking.Do(func() { close(v.broken) })
		e.mu.Lock()
		if e.view == v {
			e.replace(nil)
		}
		e.mu.Unlock()
		return errors.Join(err, rerr)
	}
	v.free <- w
	return err
}

// MaxAvailableReplicas is how many more replicas fit: those of the
// workload object names ("kind=Deployment, name=ns/name"), from the
// member's own workload when it has one (its template, Options.Templates,
// else its newest pod), else from Karmada's resource template
// (Options.Karmada), else replicas built from the request's requirements.
// The assumed workloads' replicas are placed first.
func (e *Estimator) MaxAvailableReplicas(ctx context.Context, object string, req *pb.MaxAvailableReplicasRequest) (int32, error) {
	n, _, err := e.maxAvailableReplicas(ctx, object, req)
	return n, err
}

// Where the replicas of an answer come from, as the answers' log lines
// say.
const (
	fromMemberTemplate  = "the member's workload's template"
	fromMemberPod       = "the member's workload's newest pod"
	fromKarmadaTemplate = "Karmada's resource template"
	fromRequest         = "the request's requirements"
	// A question names a workload no template is found for.
	fromRequestNoKarmada = fromRequest + ": no template of the workload on the member, and no Karmada control plane to read it from (--karmada-kubeconfig)"
	fromRequestNotFound  = fromRequest + ": no template of the workload on the member or on Karmada's control plane"
)

// karmadaTemplate is w's resource template on Karmada's control plane,
// asked only for a workload the member does not run (need): nil when there
// is none or no control plane is set, an error (no opinion) while its
// templates are not listed yet.
func (e *Estimator) karmadaTemplate(ctx context.Context, w workload, need bool) (*v1.PodTemplateSpec, error) {
	if !need || e.o.Karmada == nil {
		return nil, nil
	}
	if !e.o.Karmada.HasSynced() {
		return nil, errors.New("the resource templates of Karmada's control plane have not been read yet")
	}
	t, err := e.o.Karmada.Template(ctx, w)
	if err != nil {
		return nil, fmt.Errorf("the Karmada control plane: %w", err)
	}
	return t, nil
}

// maxAvailableReplicas is MaxAvailableReplicas, and where the replicas
// came from.
func (e *Estimator) maxAvailableReplicas(ctx context.Context, object string, req *pb.MaxAvailableReplicasRequest) (int32, string, error) {
	w, named := parseObject(object)
	var member *v1.PodTemplateSpec
	if named {
		// Answered from the caches: a template not listed yet would
		// answer from the request, wrongly.
		if !e.o.Templates.HasSynced() {
			return 0, "", errors.New("the member's workloads have not been read yet")
		}
		var err error
		if member, err = e.o.Templates.Template(ctx, w); err != nil {
			return 0, "", err
		}
	}
	var n int32
	var from string
	err := e.with(ctx, func(v *answer) error {
		var pod *v1.Pod
		newest := v.newest(w)
		karmada, err := e.karmadaTemplate(ctx, w, named && member == nil && newest == nil)
		if err != nil {
			return err
		}
		switch {
		case member != nil:
			pod, from = replicaOf(w.namespace, member.Labels, &member.Spec), fromMemberTemplate
		case newest != nil:
			pod, from = replicaOf(newest.Namespace, newest.Labels, &newest.Spec), fromMemberPod
		case karmada != nil:
			pod, from = replicaOf(w.namespace, karmada.Labels, &karmada.Spec), fromKarmadaTemplate
		default:
			if pod, err = replicaRequirements(req.GetReplicaRequirements()).pod("replicaRequirements"); err != nil {
				return err
			}
			pod.Spec.SchedulerName = e.o.SchedulerName
			switch {
			case !named:
				from = fromRequest
			case e.o.Karmada == nil:
				from = fromRequestNoKarmada
			default:
				from = fromRequestNotFound
			}
		}
		v.prioritize(pod)
		if err := v.assume(ctx, req.GetAssumedWorkloads(), e.o.SchedulerName); err != nil {
			return err
		}
		// Copies that meet only through the nodes' resources, or through
		// anti-affinity or a spread with a closed form, are counted in one
		// filter pass; the others are placed one by one.
		var counted bool
		if n, counted, err = v.sim.CountCopies(ctx, pod, e.o.MaxReplicas); err != nil || counted {
			return err
		}
		n, err = v.place(ctx, pod, e.o.MaxReplicas)
		return err
	})
	return n, from, err
}

// MaxAvailableComponentSets is how many whole sets of the components fit:
// sets are placed one after the other, each component's replicas in the
// order the request lists them, until one replica finds no node.
func (e *Estimator) MaxAvailableComponentSets(ctx context.Context, req *pb.MaxAvailableComponentSetsRequest) (int32, error) {
	var sets int32
	err := e.with(ctx, func(v *answer) error {
		type part struct {
			pod      *v1.Pod
			replicas int32
		}
		var parts []part
		var perSet int64 // int32 replicas each: their sum may not fit one
		for i, c := range req.GetComponents() {
			field := fmt.Sprintf("components[%d].replicaRequirements", i)
			pod, err := componentRequirements(c.GetReplicaRequirements(), req.GetNamespace(), "namespace").pod(field)
			if err != nil {
				return err
			}
			if c.GetReplicas() < 0 {
				return fmt.Errorf("components[%d].replicas: %d is negative", i, c.GetReplicas())
			}
			pod.Name, pod.Spec.SchedulerName = c.GetName(), e.o.SchedulerName
			v.prioritize(pod)
			parts = append(parts, part{pod: pod, replicas: c.GetReplicas()})
			perSet += int64(c.GetReplicas())
		}
		switch {
		case perSet == 0:
			return errors.New("components: no replicas in a set")
		case perSet > math.MaxInt32:
			// No answer counts in sets of more replicas than a workload
			// can have (replicas are int32), nor could they be placed
			// within the budget.
			return fmt.Errorf("components[*].replicas: %d in a set, more than %d", perSet, math.MaxInt32)
		}
		if err := v.assume(ctx, req.GetAssumedWorkloads(), e.o.SchedulerName); err != nil {
			return err
		}
		for sets < int32(max(1, int64(e.o.MaxReplicas)/perSet)) {
			for _, p := range parts {
				placed, err := v.place(ctx, p.pod, p.replicas)
				if err != nil || placed < p.replicas {
					return err
				}
			}
			sets++
		}
		return nil
	})
	return sets, err
}

// UnschedulableReplicas counts the workload's pods that the scheduler has
// found unschedulable for at least threshold and that find no node in the
// simulation either (a pod that would fit now is one the scheduler has not
// come back to yet), nor room made by the policy's moves (the inputs'
// Policy).
func (e *Estimator) UnschedulableReplicas(ctx context.Context, ref *pb.ObjectReference, threshold time.Duration) (int32, error) {
	w := workload{kind: ref.GetKind(), namespace: ref.GetNamespace(), name: ref.GetName()}
	if w.kind == "" || w.name == "" {
		return 0, errors.New("resource: kind and name are required")
	}
	var n int32
	err := e.with(ctx, func(v *answer) error {
		now := v.sim.Now()
		for _, pod := range v.pods[w] {
			since, ok := makeroom.UnschedulableSince(pod)
			if pod.Spec.NodeName != "" || !ok || now.Sub(since) < threshold {
				continue
			}
			bound, _, err := v.sim.Place(ctx, pod)
			if err != nil {
				return err
			}
			if bound == nil && !v.rooms.Has(pod.Namespace+"/"+pod.Name) {
				n++
			}
		}
		return nil
	})
	return n, err
}

// newest is the workload's newest pod in the cluster, nil if it has none.
func (v *view) newest(w workload) *v1.Pod {
	var newest *v1.Pod
	for _, pod := range v.pods[w] {
		if newest == nil || newer(pod, newest) {
			newest = pod
		}
	}
	return newest
}

// prioritize gives pod its priority class's value, as admission does.
func (v *view) prioritize(pod *v1.Pod) {
	if value, ok := v.classes[pod.Spec.PriorityClassName]; ok && pod.Spec.PriorityClassName != "" && pod.Spec.Priority == nil {
		pod.Spec.Priority = &value
	}
}

// assume places the assumed workloads' replicas, as many as fit.
func (v *answer) assume(ctx context.Context, assumed []*pb.AssumedWorkload, schedulerName string) error {
	for i, a := range assumed {
		for j, c := range a.GetComponents() {
			field := fmt.Sprintf("assumedWorkloads[%d].components[%d].replicaRequirements", i, j)
			pod, err := componentRequirements(c.GetReplicaRequirements(), a.GetNamespace(), fmt.Sprintf("assumedWorkloads[%d].namespace", i)).pod(field)
			if err != nil {
				return err
			}
			if c.GetReplicas() < 0 {
				return fmt.Errorf("assumedWorkloads[%d].components[%d].replicas: %d is negative", i, j, c.GetReplicas())
			}
			pod.Name, pod.Spec.SchedulerName = "assumed", schedulerName
			v.prioritize(pod)
			if _, err := v.place(ctx, pod, c.GetReplicas()); err != nil {
				return err
			}
		}
	}
	return nil
}

// place places up to n copies of pod, one scheduling cycle each as
// kube-scheduler runs it (its node sampling included), and returns how
// many found a node: it stops at the first that finds none.
func (v *answer) place(ctx context.Context, pod *v1.Pod, n int32) (int32, error) {
	if !v.modelled(pod) {
		return 0, fmt.Errorf("replicas of %s are placed by %q, which is not configured (--scheduler-config)", klog.KObj(pod), v.sim.SchedulerOf(pod))
	}
	for i := int32(0); i < n; i++ {
		if err := ctx.Err(); err != nil {
			return i, context.Cause(ctx)
		}
		v.seq++
		c := *pod
		c.Name = fmt.Sprintf("%s-%d", pod.Name, v.seq)
		c.UID = types.UID(fmt.Sprintf("rebalancer-estimate-%d", v.seq))
		bound, _, err := v.sim.PlaceAsScheduled(ctx, &c, v.random)
		if err != nil || bound == nil {
			return i, err
		}
	}
	return n, nil
}

// modelled says whether the simulation has the profile of pod's scheduler.
func (v *answer) modelled(pod *v1.Pod) bool {
	name := v.sim.SchedulerOf(pod)
	for _, sc := range v.sim.Schedulers() {
		if sc.Profile.SchedulerName == name {
			return true
		}
	}
	return false
}
