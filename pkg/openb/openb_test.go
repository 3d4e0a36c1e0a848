package openb

import (
	"context"
	"maps"
	"os"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestReadErrorsNameLineAndColumn(t *testing.T) {
	nodeHeader := "sn,cpu_milli,memory_mib,gpu,model\n"
	podHeader := "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
	for _, tc := range []struct {
		name, nodes, pods, want string
	}{
		{"node cpu not a number", nodeHeader + "n0,32000,1024,0,\nn1,32k,1024,0,\n", "", `nodes.csv:3:4: column "cpu_milli": "32k" is not a whole number`},
		{"node missing column", "sn,cpu_milli,gpu,model\n", "", `nodes.csv:1: header lacks column(s) memory_mib`},
		{"duplicate node", nodeHeader + "n0,1,1,0,\nn0,1,1,0,\n", "", `nodes.csv:3:1: column "sn": node "n0" is already listed on line 2`},
		{"negative gpu", nodeHeader + "n0,1,1,-1,\n", "", `nodes.csv:2:8: column "gpu": -1 is out of range [0, 64]`},
		{"model without gpu", nodeHeader + "n0,1,1,0,V100\n", "", `column "model": GPU model "V100" on a node with 0 GPUs`},
		{"ragged row", nodeHeader + "n0,1,1\n", "", `nodes.csv:2: column 1: wrong number of fields`},
		{"empty", "", "", `nodes.csv: empty file`},
		{"pod gpu_milli", "", podHeader + "p0,1000,1024,1,1200,,LS,Running,0,10,0\n", `pods.csv:2:16: column "gpu_milli": 1200 is out of range [0, 1000]`},
		{"pod qos", "", podHeader + "p0,1000,1024,0,0,,Gold,Running,0,10,0\n", `pods.csv:2:19: column "qos": "Gold" is not one of LS, BE, Burstable, Guaranteed`},
		{"pod deleted before created", "", podHeader + "p0,1000,1024,0,0,,LS,Running,20,10,0\n", `column "deletion_time": 10 is before creation_time 20`},
		{"pod empty gpu model", "", podHeader + "p0,1000,1024,1,1000,V100||T4,LS,Running,0,10,0\n", `column "gpu_spec": "V100||T4" has an empty GPU model`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.nodes != "" || tc.pods == "" {
				_, err = ReadNodes("nodes.csv", strings.NewReader(tc.nodes))
			} else {
				_, err = ReadPods("pods.csv", strings.NewReader(tc.pods))
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// smallTrace: two 8-CPU nodes, one of them with 2 GPUs of model T4.
func smallTrace(t *testing.T, podRows string) ([]Node, []Pod) {
	t.Helper()
	nodes, err := ReadNodes("nodes.csv", strings.NewReader("sn,cpu_milli,memory_mib,gpu,model\ncpu,8000,32768,0,\ngpu,8000,32768,2,T4\n"))
	if err != nil {
		t.Fatal(err)
	}
	pods, err := ReadPods("pods.csv", strings.NewReader("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"+podRows))
	if err != nil {
		t.Fatal(err)
	}
	return nodes, pods
}

func TestImportReplaysCreationsAndDeletions(t *testing.T) {
	nodes, pods := smallTrace(t, ""+
		"big,6000,1024,0,0,,LS,Running,0,100,0\n"+
		"gpu1,1000,1024,1,500,T4,BE,Running,10,1000,10\n"+
		"gpu2,1000,1024,2,1000,,LS,Running,20,1000,20\n"+ // waits: one GPU left
		"late,1000,1024,0,0,,BE,Running,500,,500\n")
	snap, stats, err := Import(context.Background(), nodes, pods, Options{At: 600})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Created != 4 || stats.Deleted != 1 || stats.Running != 2 || stats.Pending != 1 {
		t.Fatalf("stats = %+v", stats)
	}
	on := map[string]string{}
	var gpuPod *v1.Pod
	for _, p := range snap.Pods {
		on[p.Name] = p.Spec.NodeName
		if p.Name == "gpu1" {
			gpuPod = p
		}
	}
	if _, ok := on["big"]; ok {
		t.Errorf("pod big was deleted at second 100 but is in the snapshot")
	}
	if on["gpu1"] != "gpu" || on["gpu2"] != "" {
		t.Errorf("gpu1 on %q (want gpu), gpu2 on %q (want pending: 1 GPU free, 2 asked)", on["gpu1"], on["gpu2"])
	}
	// The waiting pod is marked as kube-scheduler marks a pod it cannot
	// place, since it was created; a running one is not.
	for _, p := range snap.Pods {
		var marked []v1.PodCondition
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
				marked = append(marked, c)
			}
		}
		if want := p.Name == "gpu2"; (len(marked) == 1) != want || (want && !marked[0].LastTransitionTime.Equal(&p.CreationTimestamp)) {
			t.Errorf("%s: unschedulable conditions %+v, want one since its creation: %v", p.Name, marked, want)
		}
	}
	if !gpuPod.Spec.Containers[0].Resources.Requests[GPUResource].Equal(resource.MustParse("1")) {
		t.Errorf("gpu1 requests %v", gpuPod.Spec.Containers[0].Resources.Requests)
	}
	if terms := gpuPod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; terms[0].MatchExpressions[0].Values[0] != "T4" {
		t.Errorf("gpu_spec T4 did not become node affinity: %v", terms)
	}
	if ref := gpuPod.OwnerReferences; len(ref) != 1 || ref[0].Kind != "ReplicaSet" {
		t.Errorf("pod is not owned by a ReplicaSet: %v", ref)
	}
	if snap.Nodes[1].Labels[GPUModelLabel] != "T4" || !snap.Nodes[1].Status.Allocatable[GPUResource].Equal(resource.MustParse("2")) {
		t.Errorf("gpu node: labels %v allocatable %v", snap.Nodes[1].Labels, snap.Nodes[1].Status.Allocatable)
	}

	// After gpu1 is deleted the waiting gpu2 gets both GPUs.
	snap, stats, err = Import(context.Background(), nodes, pods, Options{At: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if stats.PlacementsAfterDeletion != 1 || stats.Running != 1 || snap.Pods[0].Name != "late" {
		t.Fatalf("at 2000: stats %+v, pods %v", stats, snap.Pods)
	}
}

func TestPeak(t *testing.T) {
	_, pods := smallTrace(t, ""+
		"a,1,1,0,0,,LS,Running,0,10,0\n"+
		"b,1,1,0,0,,LS,Running,5,30,0\n"+
		"c,1,1,0,0,,LS,Running,10,30,0\n"+ // a leaves as c comes: still 2
		"d,1,1,0,0,,LS,Running,20,40,0\n") // 3 at second 20
	if got := peak(pods, false); got != 20 {
		t.Errorf("peak = %d, want 20", got)
	}
	if got := peak(pods, true); got != 20 {
		t.Errorf("peak ignoring deletions = %d, want 20 (the last creation)", got)
	}
	// The second a snapshot shows: its At, or the peak (what the CLI
	// checks --queue-from against before the replay).
	for _, tc := range []struct {
		opts Options
		want int64
	}{{Options{At: Peak}, 20}, {Options{At: 7}, 7}, {Options{At: 0}, 0}, {Options{At: Peak, IgnoreDeletions: true}, 20}} {
		if got := SnapshotAt(pods, tc.opts); got != tc.want {
			t.Errorf("SnapshotAt(%+v) = %d, want %d", tc.opts, got, tc.want)
		}
	}
}

// openbTrace reads the real trace's node list and default pod list
// (OPENB_DIR, else ../shared/data/openb beside the repository); the test
// is skipped where it is not.
func openbTrace(t testing.TB) ([]Node, []Pod) {
	t.Helper()
	dir := os.Getenv("OPENB_DIR")
	if dir == "" {
		dir = "../../../shared/data/openb"
	}
	nf, err := os.Open(dir + "/openb_node_list_all_node.csv")
	if err != nil {
		t.Skipf("openb trace not available (set OPENB_DIR): %v", err)
	}
	defer nf.Close()
	pf, err := os.Open(dir + "/openb_pod_list_default.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	nodes, err := ReadNodes(nf.Name(), nf)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := ReadPods(pf.Name(), pf)
	if err != nil {
		t.Fatal(err)
	}
	return nodes, pods
}

// TestImportOpenbTrace replays the real trace: every running pod fits its
// node, and the pods present are those alive at the snapshot's moment.
func TestImportOpenbTrace(t *testing.T) {
	nodes, pods := openbTrace(t)
	if len(nodes) != 1523 || len(pods) != 8152 {
		t.Fatalf("read %d nodes and %d pods, want 1523 and 8152", len(nodes), len(pods))
	}
	snap, stats, err := Import(context.Background(), nodes, pods, Options{At: Peak})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", stats)
	alive := 0
	for _, p := range pods {
		if p.Created <= stats.At && (p.Deleted < 0 || p.Deleted > stats.At) {
			alive++
		}
	}
	if len(snap.Pods) != alive || stats.Running+stats.Pending != alive {
		t.Fatalf("snapshot has %d pods (%d running, %d pending), %d were alive at second %d", len(snap.Pods), stats.Running, stats.Pending, alive, stats.At)
	}
	used := map[string]v1.ResourceList{}
	for _, p := range snap.Pods {
		if p.Spec.NodeName == "" {
			continue
		}
		if used[p.Spec.NodeName] == nil {
			used[p.Spec.NodeName] = v1.ResourceList{}
		}
		for r, q := range p.Spec.Containers[0].Resources.Requests {
			sum := used[p.Spec.NodeName][r]
			sum.Add(q)
			used[p.Spec.NodeName][r] = sum
		}
	}
	for _, n := range snap.Nodes {
		for r, q := range used[n.Name] {
			if a := n.Status.Allocatable[r]; q.Cmp(a) > 0 {
				t.Errorf("node %s: %s requested %s > allocatable %s", n.Name, r, q.String(), a.String())
			}
		}
	}
	// Scheduled by node class (most of the 1,523 nodes are alike) or on
	// every node, each pod lands on the same node.
	every, _, err := Import(context.Background(), nodes, pods, Options{At: Peak, EveryNode: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range every.Pods {
		if got := snap.Pods[i]; got.Name != p.Name || got.Spec.NodeName != p.Spec.NodeName {
			t.Fatalf("pod %d: %s on %q by class, %s on %q on every node", i, got.Name, got.Spec.NodeName, p.Name, p.Spec.NodeName)
		}
	}
}

// TestUntimedListIsOneMoment: a pod list without creation_time and
// deletion_time (the multi-GPU lists) imports as one moment: every pod is
// created at second 0 and none is deleted; qos and pod_phase default to BE
// and Running. A list with only one of the two time columns is refused.
func TestUntimedListIsOneMoment(t *testing.T) {
	nodes, err := ReadNodes("nodes.csv", strings.NewReader("sn,cpu_milli,memory_mib,gpu,model\ncpu,8000,32768,0,\ngpu,8000,32768,2,T4\n"))
	if err != nil {
		t.Fatal(err)
	}
	pods, err := ReadPods("multi-gpu.csv", strings.NewReader("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"+
		"a,2000,4096,2,1000\nb,1000,1024,0,0\nc,9000,1024,0,0\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Created != 0 || p.Deleted != -1 || p.QoS != "BE" || p.Phase != "Running" {
			t.Errorf("pod %s: created %d deleted %d qos %s phase %s; want 0, never, BE, Running", p.Name, p.Created, p.Deleted, p.QoS, p.Phase)
		}
	}
	snap, stats, err := Import(context.Background(), nodes, pods, Options{At: Peak})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Created != 3 || stats.Running != 2 || stats.Pending != 1 || len(snap.Pods) != 3 {
		t.Errorf("stats %+v, %d pods; want all 3 created, a and b running, c (9 CPUs) pending", stats, len(snap.Pods))
	}
	if _, err := ReadPods("half.csv", strings.NewReader("name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time\na,1,1,0,0,5\n")); err == nil ||
		!strings.Contains(err.Error(), "half.csv:1: header lacks column(s) deletion_time") {
		t.Errorf("a list with creation_time only: %v", err)
	}
}

// TestQueueFrom: pods created from QueueFrom on are not replayed but left
// pending, untried (no PodScheduled condition), unless deleted by the
// snapshot's moment; the replayed pods are the same as a replay of the
// trace cut at QueueFrom. FirstWait is the second a pod first waited.
func TestQueueFrom(t *testing.T) {
	nodes, err := ReadNodes("nodes.csv", strings.NewReader("sn,cpu_milli,memory_mib,gpu,model\nn1,8000,32768,0,\nn2,8000,32768,0,\n"))
	if err != nil {
		t.Fatal(err)
	}
	pods, err := ReadPods("pods.csv", strings.NewReader("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"+
		"a,6000,1024,0,0,,BE,Running,10,100,10\n"+
		"b,6000,1024,0,0,,BE,Running,20,100,20\n"+
		"c,6000,1024,0,0,,BE,Running,30,100,30\n"+ // waits: 2 CPUs free on each node
		"d,1000,1024,0,0,,BE,Running,40,45,40\n"+ // deleted before the moment
		"e,1000,1024,0,0,,BE,Running,50,100,50\n"))
	if err != nil {
		t.Fatal(err)
	}
	from := int64(40)
	snap, stats, err := Import(context.Background(), nodes, pods, Options{At: 60, QueueFrom: &from})
	if err != nil {
		t.Fatal(err)
	}
	state := map[string]string{}
	for _, p := range snap.Pods {
		switch {
		case p.Spec.NodeName != "":
			state[p.Name] = "running"
		case len(p.Status.Conditions) > 0:
			state[p.Name] = "waiting"
		default:
			state[p.Name] = "queued"
		}
	}
	want := map[string]string{"a": "running", "b": "running", "c": "waiting", "e": "queued"}
	if !maps.Equal(state, want) {
		t.Errorf("pods %v, want %v", state, want)
	}
	if stats.Queued != 1 || stats.Pending != 1 || stats.Running != 2 || stats.FirstWait != 30 {
		t.Errorf("stats %+v; want 1 queued, 1 pending, 2 running, first wait at 30", stats)
	}
	// Deletions ignored, d is queued too.
	snap, stats, err = Import(context.Background(), nodes, pods, Options{At: 60, QueueFrom: &from, IgnoreDeletions: true})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Queued != 2 || len(snap.Pods) != 5 {
		t.Errorf("ignoring deletions: %d queued, %d pods; want d and e queued, all 5 pods", stats.Queued, len(snap.Pods))
	}
	// Without a queue nothing is queued and c still waits first at 30.
	if _, stats, err = Import(context.Background(), nodes, pods, Options{At: 60}); err != nil || stats.Queued != 0 || stats.FirstWait != 30 {
		t.Errorf("no queue: stats %+v, %v", stats, err)
	}
}
