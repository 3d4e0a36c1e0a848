package synthetic

import (
	"fmt"
	"math"
	"sort"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/rebalancer-dev/rebalancer/pkg/gang"
)

const (
	schedulerName = "rebalancer-scheduler"

	// maxFill is the share of the cluster's allocatable CPU and memory that
	// drawn pod sizes are scaled down to when they would ask for more.
	maxFill = 0.45

	daemonSetKind = "DaemonSet"
)

// group is a set of identical pods: the pods of one owner, or one bare pod.
type group struct {
	namespace, app string
	image          string
	// ownerKind is "" for a bare pod.
	ownerAPIVersion, ownerKind, ownerName string
	ownerUID                              types.UID
	// podPrefix names the pods: podPrefix-xxxxx, or podPrefix-<ordinal> for a StatefulSet.
	podPrefix string
	replicas  int
	cpu, mem  int64 // requests of each pod, millicores and bytes
	// drawnCPU and drawnMem are the size drawn for a workload before
	// scaling, millicores and bytes; 0 for pods of a fixed size.
	drawnCPU, drawnMem float64
	class              string
	priority           int32
	phase              v1.PodPhase
	pdb                bool
	gang               string // the gang its pods belong to, "" for none
	first              int    // index of its first pod in generator.parts
}

// fixed describes pods of a fixed size.
type fixed struct {
	namespace, name string
	cpu, memMi      int64
}

// daemonSets are the DaemonSets, in the order they are added while there are pods for one per node.
var daemonSets = []fixed{
	{"logging", "fluent-bit", 100, 200},
	{"monitoring", "node-exporter", 50, 64},
	{metav1.NamespaceSystem, "kube-proxy", 100, 128},
}

var (
	coreDNS       = fixed{metav1.NamespaceSystem, "coredns", 100, 70}
	metricsServer = fixed{metav1.NamespaceSystem, "metrics-server", 100, 200}
)

// The priority classes pods use.
var (
	systemNodeCritical    = priorityClass("system-node-critical", 2000001000, "Used for system critical pods that must not be moved from their current node.")
	systemClusterCritical = priorityClass("system-cluster-critical", 2000000000, "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.")
	highPriority          = priorityClass("high-priority", 100000, "Customer-facing services.")
	lowPriority           = priorityClass("low-priority", -10, "Batch work that yields to everything else.")
)

func priorityClass(name string, value int32, description string) schedulingv1.PriorityClass {
	return schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, Description: description}
}

// teamNamespaces are where workloads run; clusters of more nodes use more of them.
var teamNamespaces = []string{
	"payments", "checkout", "catalog", "search", "recommendations", "ads", "identity", "notifications", "billing", "shipping",
	"inventory", "pricing", "reviews", "media", "analytics", "reporting", "ml-serving", "feature-store", "data-ingest", "etl",
	"streaming", "chat", "email", "sms", "fraud", "risk", "ledger", "accounts", "onboarding", "support",
	"cms", "web", "mobile-api", "graphql", "gateway", "auth", "audit", "compliance", "geo", "maps",
	"translations", "experiments", "loyalty", "partners", "marketplace", "orders", "cart", "warehouse", "logistics", "forecasting",
}

var (
	statelessNames = []string{"api", "web", "worker", "consumer", "frontend", "backend", "gateway", "cache", "indexer", "sync",
		"scheduler", "exporter", "processor", "router", "renderer", "notifier", "ingester", "compactor", "reconciler", "webhook"}
	statefulNames = []string{"postgres", "redis", "kafka", "zookeeper", "elasticsearch", "rabbitmq", "etcd", "mongodb", "cassandra", "clickhouse"}
	bareNames     = []string{"debug", "toolbox", "netshoot", "psql-client", "load-test"}
	cronJobNames  = []string{"nightly-report", "db-backup", "cleanup", "billing-export", "index-rebuild"}
)

// Drawn sizes are rounded down to values people write in manifests.
var (
	cpuSteps = []int64{50, 100, 150, 200, 250, 300, 400, 500, 750, 1000, 1500, 2000, 3000, 4000, 6000, 8000}
	memSteps = []int64{64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768} // Mi
)

// roundDown returns the largest step not above v, or the smallest step.
func roundDown(steps []int64, v float64) int64 {
	i := sort.Search(len(steps), func(i int) bool { return float64(steps[i]) > v })
	return steps[max(i-1, 0)]
}

// plan draws every group of pods, DaemonSets first, and sizes them.
func (g *generator) plan() []*group {
	var groups []*group
	budget := g.o.Pods
	for _, ds := range daemonSets[:min(len(daemonSets), budget/g.o.Nodes)] {
		gr := g.fixedGroup(ds, "apps/v1", daemonSetKind, ds.name, systemNodeCritical, g.o.Nodes)
		groups = append(groups, gr)
		budget -= gr.replicas
	}
	for _, s := range []struct {
		fixed
		replicas int
	}{{coreDNS, max(2, g.o.Nodes/250)}, {metricsServer, 1}} {
		if n := min(s.replicas, budget); n > 0 {
			gr := g.fixedGroup(s.fixed, "apps/v1", "ReplicaSet", s.name+"-"+g.hash(10), systemClusterCritical, n)
			groups = append(groups, gr)
			budget -= n
		}
	}
	if n := min(g.o.Gang, budget); n > 0 {
		groups = append(groups, g.gangGroup(n))
		budget -= n
	}
	teams := min(len(teamNamespaces), 20+g.o.Nodes/100)
	bare, finished := budget/400, budget/200
	groups = append(groups, g.workloads(budget-bare-finished, teams)...)
	for range bare {
		groups = append(groups, g.barePod(teams))
	}
	for i := range finished {
		groups = append(groups, g.finishedPod(i, teams))
	}
	g.size(groups)
	return groups
}

func (g *generator) fixedGroup(f fixed, apiVersion, kind, owner string, class schedulingv1.PriorityClass, replicas int) *group {
	g.useNamespace(f.namespace)
	return &group{
		namespace: f.namespace, app: f.name, image: image(f.namespace, f.name),
		ownerAPIVersion: apiVersion, ownerKind: kind, ownerName: owner, ownerUID: g.uid(), podPrefix: owner,
		replicas: replicas, cpu: f.cpu, mem: f.memMi * mi,
		class: class.Name, priority: class.Value, phase: v1.PodRunning,
	}
}

// gangGroup is the Job of Options.Gang: n small pods of one gang.
func (g *generator) gangGroup(n int) *group {
	gr := g.fixedGroup(gangJob, "batch/v1", "Job", gangJob.name, lowPriority, n)
	gr.gang = gangName
	return gr
}

// gangJob is the Job of Options.Gang, whose pods form the gang gangName.
var gangJob = fixed{"ml-training", "training", 100, 256}

const gangName = "training"

func image(project, app string) string {
	return "registry.example.com/" + project + "/" + app + ":v1"
}

// team draws a namespace of the first n team namespaces, the first ones
// more often, as a few teams run most of a cluster.
func (g *generator) team(n int) string {
	ns := teamNamespaces[int(float64(n)*math.Pow(g.rng.Float64(), 1.6))]
	g.useNamespace(ns)
	return ns
}

// workloads draws ReplicaSets and StatefulSets with pods pods in all.
func (g *generator) workloads(pods, teams int) []*group {
	var groups []*group
	for i := 0; pods > 0; i++ {
		gr := &group{namespace: g.team(teams), ownerAPIVersion: "apps/v1", phase: v1.PodRunning}
		gr.drawnCPU, gr.drawnMem = g.drawSize()
		if g.rng.IntN(10) == 0 {
			gr.app = fmt.Sprintf("%s-%d", statefulNames[g.rng.IntN(len(statefulNames))], i)
			gr.ownerKind, gr.ownerName = "StatefulSet", gr.app
			gr.replicas = []int{1, 3, 3, 3, 5}[g.rng.IntN(5)]
		} else {
			gr.app = fmt.Sprintf("%s-%d", statelessNames[g.rng.IntN(len(statelessNames))], i)
			gr.ownerKind, gr.ownerName = "ReplicaSet", gr.app+"-"+g.hash(10)
			gr.replicas = g.drawReplicas(gr.drawnCPU)
		}
		gr.replicas = min(gr.replicas, pods)
		pods -= gr.replicas
		gr.image = image(gr.namespace, gr.app)
		gr.ownerUID = g.uid()
		gr.podPrefix = gr.ownerName
		switch r := g.rng.IntN(100); {
		case r < 8:
			gr.class, gr.priority = highPriority.Name, highPriority.Value
		case r < 15:
			gr.class, gr.priority = lowPriority.Name, lowPriority.Value
		}
		gr.pdb = g.rng.IntN(10) == 0
		groups = append(groups, gr)
	}
	return groups
}

// drawSize draws a workload's requests, millicores and bytes: log-normal
// CPU with a median of 150m and a long tail, and memory correlated with it,
// 3Gi per core in the median.
func (g *generator) drawSize() (cpu, mem float64) {
	cpu = 150 * math.Exp(1.1*g.rng.NormFloat64())
	mem = cpu / 1000 * 3 * (1 << 30) * math.Exp(0.6*g.rng.NormFloat64())
	return cpu, mem
}

// drawReplicas draws from 1 to 50 replicas, Pareto-distributed (most
// workloads have a few, some have dozens); big pods run fewer replicas.
func (g *generator) drawReplicas(cpu float64) int {
	r := int(min(50, math.Pow(1-g.rng.Float64(), -1/0.8)))
	if cpu >= 2000 {
		r = 1 + r/4
	}
	return r
}

// barePod is a pod someone started by hand; nothing recreates it.
func (g *generator) barePod(teams int) *group {
	ns := metav1.NamespaceDefault
	if g.rng.IntN(2) == 0 {
		ns = g.team(teams)
	}
	name := bareNames[g.rng.IntN(len(bareNames))]
	size := g.rng.IntN(4)
	return &group{
		namespace: ns, app: name, image: image("tools", name), podPrefix: name,
		replicas: 1, cpu: []int64{100, 250, 500, 1000}[size], mem: []int64{128, 256, 512, 1024}[size] * mi,
		phase: v1.PodRunning,
	}
}

// finishedPod is the pod of a Job that a CronJob started and that has
// succeeded or, one in four, failed.
func (g *generator) finishedPod(i, teams int) *group {
	cron := cronJobNames[g.rng.IntN(len(cronJobNames))]
	job := fmt.Sprintf("%s-%d", cron, 29170000+i) // CronJobs name Jobs by the minute they are scheduled for
	gr := &group{
		namespace: g.team(teams), app: cron, ownerAPIVersion: "batch/v1", ownerKind: "Job", ownerName: job,
		ownerUID: g.uid(), podPrefix: job, replicas: 1, phase: v1.PodSucceeded,
	}
	gr.image = image(gr.namespace, cron)
	gr.drawnCPU, gr.drawnMem = g.drawSize()
	if g.rng.IntN(4) == 0 {
		gr.phase = v1.PodFailed
	}
	return gr
}

// size sets the requests of drawn groups: scaled down if they would ask
// for more than maxFill of the cluster, at most a quarter of the largest
// node so that small clusters fit, rounded down to a manifest's values.
func (g *generator) size(groups []*group) {
	var allocCPU, allocMem, largestCPU, largestMem float64
	for _, n := range g.nodes {
		allocCPU += float64(n.cpu)
		allocMem += float64(n.mem)
		largestCPU = max(largestCPU, float64(n.cpu))
		largestMem = max(largestMem, float64(n.mem))
	}
	var fixedCPU, fixedMem, drawnCPU, drawnMem float64
	for _, gr := range groups { // drawn groups have no requests yet
		r := float64(gr.replicas)
		fixedCPU += r * float64(gr.cpu)
		fixedMem += r * float64(gr.mem)
		drawnCPU += r * gr.drawnCPU
		drawnMem += r * gr.drawnMem
	}
	scale := 1.0
	if drawnCPU > 0 {
		scale = min(scale, (maxFill*allocCPU-fixedCPU)/drawnCPU, (maxFill*allocMem-fixedMem)/drawnMem)
	}
	for _, gr := range groups {
		if gr.drawnCPU > 0 {
			gr.cpu = roundDown(cpuSteps, min(gr.drawnCPU*scale, largestCPU/4))
			gr.mem = roundDown(memSteps, min(gr.drawnMem*scale, largestMem/4)/mi) * mi
		}
	}
}

// addPriorityClasses adds the classes pods use.
func (g *generator) addPriorityClasses() {
	for _, pc := range []schedulingv1.PriorityClass{systemNodeCritical, systemClusterCritical, highPriority, lowPriority} {
		pc.UID = g.uid()
		policy := v1.PreemptLowerPriority
		if pc.Value < 0 {
			policy = v1.PreemptNever // batch work waits rather than preempts
		}
		pc.PreemptionPolicy = &policy
		g.snap.PriorityClasses = append(g.snap.PriorityClasses, &pc)
	}
}

// addPods creates the pods of every group, DaemonSet pods bound to their
// node; it stops early when the generation's context ends.
func (g *generator) addPods(groups []*group) {
	g.snap.Pods = make([]*v1.Pod, 0, g.o.Pods)
	for _, gr := range groups {
		gr.first = g.next
		// Sibling pods share these maps, which saves 130 MB at 150,000 pods.
		labels := map[string]string{"app": gr.app}
		if gr.gang != "" {
			labels[gang.PodGroupLabel] = gr.gang
		}
		requests := v1.ResourceList{
			v1.ResourceCPU:    *resource.NewMilliQuantity(gr.cpu, resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(gr.mem, resource.BinarySI),
		}
		for j := range gr.replicas {
			if g.next%4096 == 0 && g.ctx.Err() != nil {
				return // GenerateContext says why
			}
			var name string
			if gr.ownerKind == "StatefulSet" {
				name = fmt.Sprintf("%s-%d", gr.podPrefix, j)
			} else {
				name = g.podName(gr.podPrefix)
			}
			p := g.addPod(gr, name, labels, requests)
			if gr.ownerKind == daemonSetKind {
				node := g.nodes[j].node.Name
				p.Spec.NodeName = node
				// What the DaemonSet controller adds to pin each pod to its node.
				p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
						MatchFields: []v1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpIn, Values: []string{node}}},
					}}},
				}}
				p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
			}
		}
	}
}

func (g *generator) addPod(gr *group, name string, labels map[string]string, requests v1.ResourceList) *v1.Pod {
	part := &g.parts[g.next]
	g.next++
	part.priority = gr.priority
	part.container[0] = v1.Container{
		Name:      gr.app,
		Image:     gr.image,
		Resources: v1.ResourceRequirements{Requests: requests},
	}
	p := &part.pod
	p.Name = name
	p.Namespace = gr.namespace
	p.UID = g.uid()
	p.Labels = labels
	if gr.ownerKind != "" {
		part.controller = true
		part.owner[0] = metav1.OwnerReference{
			APIVersion: gr.ownerAPIVersion, Kind: gr.ownerKind, Name: gr.ownerName, UID: gr.ownerUID, Controller: &part.controller,
		}
		p.OwnerReferences = part.owner[:]
	}
	p.Spec = v1.PodSpec{
		Containers:        part.container[:],
		SchedulerName:     schedulerName,
		PriorityClassName: gr.class,
		Priority:          &part.priority,
	}
	p.Status.Phase = gr.phase
	g.snap.Pods = append(g.snap.Pods, p)
	return p
}

// addPDBs adds a PodDisruptionBudget for the groups that have one. Their
// status is what the disruption controller reports with every pod healthy;
// one in five allows no disruption at all, a common misconfiguration.
func (g *generator) addPDBs(groups []*group) {
	for _, gr := range groups {
		if !gr.pdb {
			continue
		}
		n := int32(gr.replicas)
		spec := policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": gr.app}}}
		var allowed int32
		switch r := g.rng.IntN(5); {
		case r == 0 && n == 1:
			spec.MinAvailable = ptrTo(intstr.FromInt32(1))
		case r == 0:
			spec.MinAvailable = ptrTo(intstr.FromString("100%"))
		case r == 1 && n > 2:
			spec.MaxUnavailable = ptrTo(intstr.FromInt32(2))
			allowed = 2
		default:
			spec.MaxUnavailable = ptrTo(intstr.FromInt32(1))
			allowed = 1
		}
		g.snap.PodDisruptionBudgets = append(g.snap.PodDisruptionBudgets, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: gr.app, Namespace: gr.namespace, UID: g.uid(), Generation: 1},
			Spec:       spec,
			Status: policyv1.PodDisruptionBudgetStatus{
				ObservedGeneration: 1,
				DisruptionsAllowed: allowed,
				CurrentHealthy:     n,
				DesiredHealthy:     n - allowed,
				ExpectedPods:       n,
			},
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
