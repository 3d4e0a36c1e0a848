package planner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"sigs.k8s.io/descheduler/pkg/api"

	"github.com/rebalancer-dev/rebalancer/pkg/openb"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/profile"
	"github.com/rebalancer-dev/rebalancer/pkg/synthetic"
)

// everyWalker enables, with no limits, the plugins that ask for evictions
// in Go map order (RemoveDuplicates, topology spread) beside the ones that
// walk sorted nodes, so that any order left to chance shows in the plan.
const everyWalker = `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: all
  pluginConfig:
  - name: DefaultEvictor
  - name: HighNodeUtilization
    args:
      thresholds: {cpu: 40, memory: 40}
  - name: RemovePodsViolatingTopologySpreadConstraint
  - name: RemovePodsViolatingInterPodAntiAffinity
  - name: RemovePodsViolatingNodeTaints
  - name: RemoveDuplicates
  plugins:
    balance:
      enabled: [HighNodeUtilization, RemovePodsViolatingTopologySpreadConstraint, RemoveDuplicates]
    deschedule:
      enabled: [RemovePodsViolatingInterPodAntiAffinity, RemovePodsViolatingNodeTaints]
`

// TestPlansAreReproducible: the same snapshot, policy and profile give the
// same plan, byte for byte, however often it is computed.
func TestPlansAreReproducible(t *testing.T) {
	snap, err := synthetic.Generate(synthetic.Options{Nodes: 60, Pods: 1500, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	walkers := filepath.Join(t.TempDir(), "walkers.yaml")
	if err := os.WriteFile(walkers, []byte(everyWalker), 0o600); err != nil {
		t.Fatal(err)
	}
	allWalkers, err := policy.Load(walkers, fake.NewClientset(), policy.Registry())
	if err != nil {
		t.Fatal(err)
	}
	runs := 20
	if testing.Short() {
		runs = 5
	}
	binpacking, packing := loadPair(t, "binpacking")
	balancing, spreading := loadPair(t, "balancing")
	for _, c := range []struct {
		name string
		pol  *api.DeschedulerPolicy
		prof *config.KubeSchedulerProfile
	}{
		{"binpacking", binpacking, packing},
		{"balancing", balancing, spreading},
		{"walkers", allWalkers, packing},
	} {
		t.Run(c.name, func(t *testing.T) {
			samePlans(t, runs, func() (*plan.Plan, error) {
				return planOn(context.Background(), c.pol, c.prof, snap, Options{ID: "same", MinScoreGain: 1, AllowConflicting: true})
			})
		})
	}
}

// tied is a cluster of exact ties: identical nodes, each with identical pods
// of one workload and of a PDB-limited one, identical usage, and a few
// nodes made busy so that the utilization plugins have sources and
// destinations. Which of the tied nodes goes first decides where pods go
// and who spends the PDB.
func tied() *cluster {
	c := newCluster()
	for i := 1; i <= 12; i++ {
		var taints []v1.Taint
		if i == 12 {
			taints = []v1.Taint{noSchedule}
		}
		c.node(fmt.Sprintf("node-%02d", i), "8", "32Gi", taints...)
	}
	use := func(p *v1.Pod, cpu string) {
		c.snap.PodMetrics = append(c.snap.PodMetrics, &metricsv1beta1.PodMetrics{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}, Timestamp: metav1.NewTime(now("")),
			Containers: []metricsv1beta1.ContainerMetrics{{Name: "c", Usage: v1.ResourceList{
				v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("1Gi")}}},
		})
	}
	for i, n := range c.snap.Nodes {
		use(c.pod("kube-system", "log-agent", "DaemonSet", n.Name, "100m", "128Mi"), "50m")
		used := "3"
		if i < 3 {
			use(c.pod("team-a", "db", "StatefulSet", n.Name, "2", "8Gi"), "3")
			used = "6500m"
		}
		if i < 11 {
			use(c.pod("team-a", "api", "ReplicaSet", n.Name, "2", "8Gi"), "1500m")
		}
		if i < 8 {
			for range 2 {
				use(c.pod("team-b", "web", "ReplicaSet", n.Name, "500m", "1Gi"), "200m")
			}
		}
		c.snap.NodeMetrics = append(c.snap.NodeMetrics, &metricsv1beta1.NodeMetrics{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name}, Timestamp: metav1.NewTime(now("")),
			Usage: v1.ResourceList{v1.ResourceCPU: resource.MustParse(used), v1.ResourceMemory: resource.MustParse("12Gi")},
		})
	}
	c.pod("team-b", "batch", "ReplicaSet", "node-12", "1", "2Gi") // on the tainted node
	c.pdb("team-b", "web", 3)
	return c
}

// TestNoMoveOffAFilledNode: a balance move off a node the plan moves pods
// onto is refused with its own reason, not as a limit.
func TestNoMoveOffAFilledNode(t *testing.T) {
	p := runPlan(t, tied(), "binpacking", Options{MinScoreGain: 1})
	if p.Summary.SkippedByReason[plan.ReasonTarget] == 0 {
		t.Fatalf("no skip %q; skipped %v", plan.ReasonTarget, p.Summary.SkippedByReason)
	}
	for _, s := range p.Skipped {
		if s.Reason == plan.ReasonTarget && !strings.Contains(s.Detail, "moves pods onto") {
			t.Errorf("skip %+v: detail does not name the filled node", s)
		}
		if s.Reason == plan.ReasonLimit && strings.Contains(s.Detail, "moves pods onto") {
			t.Errorf("skip %+v: a filled node reported as a limit", s)
		}
	}
}

// TestTiedPlansAreReproducible: a cluster of exact ties gives the same plan
// every time, whichever order the plugins' maps come in.
func TestTiedPlansAreReproducible(t *testing.T) {
	binpacking, packing := loadPair(t, "binpacking")
	balancing, spreading := loadPair(t, "balancing")
	loadAware, loadProfile := loadPair(t, "load-aware")
	// The total limit reached while tied sources still wait their turn:
	// the limit skips must not depend on how many turns there were left.
	limited := binpacking.DeepCopy()
	limited.MaxNoOfPodsToEvictTotal = ptrTo(uint(2))
	// The namespace limits spent while tied sources wait: those whose pods
	// they hold take no turn.
	perNamespace := binpacking.DeepCopy()
	perNamespace.MaxNoOfPodsToEvictPerNamespace = ptrTo(uint(1))
	_, unsteered, err := profile.Load(mostAllocated(t), "")
	if err != nil {
		t.Fatal(err)
	}
	runs := 20
	if testing.Short() {
		runs = 5
	}
	for _, c := range []struct {
		name string
		pol  *api.DeschedulerPolicy
		prof *config.KubeSchedulerProfile
		// scheduler is the pods' scheduler, when not rebalancer-scheduler.
		scheduler string
	}{
		{"binpacking", binpacking, packing, ""},
		{"balancing", balancing, spreading, ""},
		{"load-aware", loadAware, loadProfile, ""},
		{"binpacking, unsteered", binpacking, unsteered, "default-scheduler"},
		{"binpacking, total limit reached", limited, packing, ""},
		{"binpacking, namespace limits reached", perNamespace, packing, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			samePlans(t, runs, func() (*plan.Plan, error) {
				cl := tied()
				if c.scheduler != "" {
					for _, p := range cl.snap.Pods {
						p.Spec.SchedulerName = c.scheduler
					}
				}
				return planOn(context.Background(), c.pol, c.prof, cl.snap, Options{ID: "same", MinScoreGain: 1, AllowConflicting: true})
			})
		})
	}
}

// TestOpenbPlansAreReproducible: the openb trace's default pod list
// (1,523 nodes, most of them alike, hundreds holding one pod of one size),
// run by rebalancer-scheduler, with the shipped bin-packing pair at
// maxNodesPerCycle 10: the same plan in every run. HighNodeUtilization
// walks those tied nodes in Go map order and stops when its destinations
// are full, so which tied nodes it asked about first differs from run to
// run; the order of turns must not follow it. Skipped where the trace is
// not (OPENB_DIR, else ../shared/data/openb beside the repository).
func TestOpenbPlansAreReproducible(t *testing.T) {
	dir := os.Getenv("OPENB_DIR")
	if dir == "" {
		dir = "../../../shared/data/openb"
	}
	read := func(name string, parse func(string, io.Reader) error) {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Skipf("openb trace not available (set OPENB_DIR): %v", err)
		}
		defer f.Close()
		if err := parse(f.Name(), f); err != nil {
			t.Fatal(err)
		}
	}
	var nodes []openb.Node
	var pods []openb.Pod
	read("openb_node_list_all_node.csv", func(name string, r io.Reader) (err error) { nodes, err = openb.ReadNodes(name, r); return err })
	read("openb_pod_list_default.csv", func(name string, r io.Reader) (err error) { pods, err = openb.ReadPods(name, r); return err })
	snap, _, err := openb.Import(context.Background(), nodes, pods, openb.Options{At: openb.Peak, SchedulerName: "rebalancer-scheduler"})
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := os.ReadFile(filepath.Join("..", "..", "policies", "binpacking-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, bytes.Replace(shipped, []byte("maxNodesPerCycle: 50"), []byte("maxNodesPerCycle: 10"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Load(file, fake.NewClientset(), policy.Registry())
	if err != nil {
		t.Fatal(err)
	}
	_, prof := loadPair(t, "binpacking")
	runs := 8
	if testing.Short() {
		runs = 3
	}
	samePlans(t, runs, func() (*plan.Plan, error) {
		return planOn(context.Background(), pol, prof, snap, Options{ID: "same", MinScoreGain: 1})
	})
}

// samePlans plans runs times and requires one plan, byte for byte, with
// moves in it.
func samePlans(t *testing.T, runs int, planned func() (*plan.Plan, error)) {
	t.Helper()
	var first []byte
	for i := range runs {
		p, err := planned()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && len(p.Moves) == 0 {
			t.Fatal("no moves: the test shows nothing")
		}
		got, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = got
			continue
		}
		if !bytes.Equal(got, first) {
			n := 0
			for n < len(got) && n < len(first) && got[n] == first[n] {
				n++
			}
			lo := max(0, n-200)
			t.Fatalf("run %d differs from run 0 at byte %d:\nrun 0: …%s\nrun %d: …%s", i, n, first[lo:min(len(first), n+200)], i, got[lo:min(len(got), n+200)])
		}
	}
}
