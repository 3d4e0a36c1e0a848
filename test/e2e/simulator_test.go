//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/rebalancer-dev/rebalancer/pkg/profile"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// TestSimulatorPredictsRealScheduler: for each scoring strategy, the
// in-memory simulation of a profile predicts the node that
// rebalancer-scheduler, running the same profile file, then really binds.
func TestSimulatorPredictsRealScheduler(t *testing.T) {
	strategies := []struct {
		name, prefix string // prefix: node names of their own, so no pod of another case is counted
		edit         func(cfg map[string]any)
	}{
		{"MostAllocated", "most", nil},
		{"LeastAllocated", "least", func(cfg map[string]any) {
			pluginArgs(cfg, "NodeResourcesFit")["scoringStrategy"].(map[string]any)["type"] = "LeastAllocated"
		}},
		{"RequestedToCapacityRatio", "ratio", nil}, // balancing-scheduler.yaml as shipped
	}
	for _, s := range strategies {
		t.Run(s.name, func(t *testing.T) {
			file := "binpacking-scheduler.yaml"
			if s.name == "RequestedToCapacityRatio" {
				file = "balancing-scheduler.yaml"
			}
			e := newTestEnv(t)
			schedName := "sim-" + e.name
			config := schedulerConfig(t, file, func(cfg map[string]any) {
				cfg["leaderElection"] = map[string]any{"leaderElect": false}
				cfg["profiles"].([]any)[0].(map[string]any)["schedulerName"] = schedName
				if s.edit != nil {
					s.edit(cfg)
				}
			})
			startProcess(t, "rebalancer-scheduler", "--config="+config, "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", freePort(t)))
			_, prof, err := profile.Load(config, schedName)
			if err != nil {
				t.Fatal(err)
			}

			// Nodes of different sizes and loads, so that every strategy has
			// one clear best node (the real scheduler breaks ties at random).
			n := func(x string) string { return s.prefix + "-" + x }
			e.addNodes("8", n("a"), n("b"))
			e.addNodes("16", n("c"))
			e.addNodes("4", n("d"))
			e.addPinnedPod("load-a", n("a"), resources("5", "6Gi"))
			e.addPinnedPod("load-b", n("b"), resources("1", "1Gi"))
			e.addPinnedPod("load-c", n("c"), resources("6", "20Gi"))
			e.addPinnedPod("load-d", n("d"), resources("1500m", "2Gi"))

			sizes := []v1.ResourceList{resources("1", "1Gi"), resources("500m", "3Gi"), resources("2", "512Mi"), resources("250m", "256Mi"), resources("1500m", "4Gi")}
			for i, req := range sizes {
				snap := e.liveSnapshot()
				_, ctx := ktesting.NewTestContext(t)
				sim, err := simulator.New(ctx, []*schedconfig.KubeSchedulerProfile{prof}, snap)
				if err != nil {
					t.Fatal(err)
				}
				spec := e.podSpec(schedName, req)
				pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", i), Namespace: e.ns, UID: types.UID(fmt.Sprintf("probe-%d", i))}, Spec: spec}
				pred, err := sim.Predict(ctx, pod, simulator.PredictOptions{})
				if err != nil {
					t.Fatal(err)
				}
				pod.UID = ""
				if _, err := client.CoreV1().Pods(e.ns).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				var bound string
				e.poll("probe bound", func() (bool, error) {
					p, err := client.CoreV1().Pods(e.ns).Get(e.ctx, pod.Name, metav1.GetOptions{})
					bound = p.Spec.NodeName
					return err == nil && bound != "", nil
				})
				t.Logf("%s probe-%d (%s CPU, %s): predicted %s (score %d%s), bound %s",
					s.name, i, req.Cpu(), req.Memory(), pred.Node, pred.Score, pred.Unschedulable, bound)
				if pred.Node != bound {
					t.Errorf("probe-%d: simulator predicted %s, rebalancer-scheduler bound %s", i, pred.Node, bound)
				}
			}
		})
	}
}

// liveSnapshot lists this test's nodes and every pod on them.
func (e *testEnv) liveSnapshot() *snapshot.Snapshot {
	e.t.Helper()
	nodes, err := client.CoreV1().Nodes().List(e.ctx, metav1.ListOptions{LabelSelector: testLabel + "=" + e.name})
	if err != nil {
		e.t.Fatal(err)
	}
	snap := &snapshot.Snapshot{}
	names := map[string]bool{}
	for i := range nodes.Items {
		snap.Nodes = append(snap.Nodes, &nodes.Items[i])
		names[nodes.Items[i].Name] = true
	}
	pods, err := client.CoreV1().Pods("").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for i := range pods.Items {
		if names[pods.Items[i].Spec.NodeName] {
			snap.Pods = append(snap.Pods, &pods.Items[i])
		}
	}
	return snap
}

// process is one of our binaries running for a test.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited
	err  error         // its exit status, once done
	log  string        // its output file
}

// tail returns the last n lines of the process's output.
func (p *process) tail(n int) string { return tail(p.log, n) }

// waitUp polls until up reports the process serving, and fails at once if
// it exits first.
func (p *process) waitUp(e *testEnv, what string, up func() bool) {
	e.t.Helper()
	e.poll(what, func() (bool, error) {
		select {
		case <-p.done:
			return false, fmt.Errorf("%s exited: %v\n%s", filepath.Base(p.cmd.Path), p.err, p.tail(20))
		default:
		}
		return up(), nil
	})
}

// terminate sends SIGTERM and waits up to limit for the process to exit; it
// returns when the signal was sent and how long the process took to exit.
func (p *process) terminate(t *testing.T, limit time.Duration) (signalled time.Time, took time.Duration) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signalled = time.Now()
	select {
	case <-p.done:
	case <-time.After(limit):
		t.Fatalf("still running %s after SIGTERM:\n%s", limit, p.tail(10))
	}
	took = time.Since(signalled)
	t.Logf("exited %s after SIGTERM (%v); last log lines:\n%s", took.Round(time.Millisecond), p.err, p.tail(5))
	return signalled, took
}

// startProcess runs one of our binaries until the test ends, logging to a
// file that is printed if the test fails.
func startProcess(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), bin+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: exec.Command(filepath.Join(binDir, bin), args...), done: make(chan struct{}), log: logPath}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		logFile.Close()
		if t.Failed() {
			t.Logf("%s log %s:\n%s", bin, logPath, tail(logPath, 40))
		}
	})
	return p
}
