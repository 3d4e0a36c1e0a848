//go:build e2e

package e2e

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/rebalancer-dev/rebalancer/pkg/executor"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// podPlaces remembers, for every pod of a namespace ever seen bound, its
// owner and node: an evicted pod is gone when the history is compared with
// the evictions.
type podPlaces struct {
	mu     sync.Mutex
	placed map[string]placement // by pod name
}

type placement struct {
	owner types.UID
	node  string
}

func (e *testEnv) trackPods() *podPlaces {
	e.t.Helper()
	p := &podPlaces{placed: map[string]placement{}}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(e.ns))
	seen := func(obj any) {
		pod, ok := obj.(*v1.Pod)
		if !ok || pod.Spec.NodeName == "" {
			return
		}
		owner := metav1.GetControllerOf(pod)
		if owner == nil {
			return
		}
		p.mu.Lock()
		p.placed[pod.Name] = placement{owner: owner.UID, node: pod.Spec.NodeName}
		p.mu.Unlock()
	}
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) },
	})
	ctx, cancel := context.WithCancel(e.ctx)
	e.t.Cleanup(func() { cancel(); factory.Shutdown() })
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return p
}

func (p *podPlaces) of(name string) (placement, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pl, ok := p.placed[name]
	return pl, ok
}

// evictionsOf lists the pods of the namespace rebalancer evicted since the
// given time (201 in the audit log), oldest first.
func evictionsOf(t *testing.T, ns string, since time.Time) []string {
	t.Helper()
	var out []string
	prefix := "/api/v1/namespaces/" + ns + "/pods/"
	for _, ev := range auditEvents(t, "rebalancer/", since) {
		if ev.Verb == "create" && ev.code() == http.StatusCreated && strings.HasPrefix(ev.RequestURI, prefix) && strings.HasSuffix(ev.RequestURI, "/eviction") {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(ev.RequestURI, prefix), "/eviction"))
		}
	}
	return out
}

// checkHistoryHasEvictions fails for every eviction of the namespace since
// the given time that the stored history does not hold: a move of the
// pod's owner off the pod's node, one for each such eviction.
func checkHistoryHasEvictions(t *testing.T, e *testEnv, places *podPlaces, historyName string, since time.Time) int {
	t.Helper()
	evicted := evictionsOf(t, e.ns, since)
	want := map[placement][]string{}
	for _, name := range evicted {
		pl, ok := places.of(name)
		if !ok {
			t.Errorf("evicted pod %s was never seen bound", name)
			continue
		}
		want[pl] = append(want[pl], name)
	}
	have := map[placement]int{}
	for _, m := range readHistory(t, e, historyName) {
		have[placement{owner: m.Owner, node: m.From}]++
	}
	for pl, pods := range want {
		if have[pl] < len(pods) {
			t.Errorf("the history holds %d moves of owner %s off %s, the cluster saw %d evictions: %v", have[pl], pl.owner, pl.node, len(pods), pods)
		}
	}
	return len(evicted)
}

// drainTaints returns the drain taint of each of the nodes that has one:
// node name to plan ID.
func drainTaints(t *testing.T, e *testEnv, names []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range names {
		node, err := client.CoreV1().Nodes().Get(e.ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, taint := range node.Spec.Taints {
			if taint.Key == wellknown.DrainTaintKey {
				out[n] = taint.Value
			}
		}
	}
	return out
}

// checkNoTaintEvictions fails for any move of the namespace made for a
// node taint off a node other than tainted (the nodes the test tainted
// itself): elsewhere only rebalancer's own drain taint can be there, and it
// is never a violation. Rebalanced Events name the strategy and the source.
func checkNoTaintEvictions(t *testing.T, e *testEnv, tainted ...string) {
	t.Helper()
	evs, err := client.EventsV1().Events(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.Items {
		if ev.Reason != executor.EventRebalanced && ev.Reason != executor.EventRebalancePlanned {
			continue
		}
		// The note reads "<strategy>: <source> → <target> ...".
		source, ok := strings.CutPrefix(ev.Note, "RemovePodsViolatingNodeTaints: ")
		if ok && !slices.ContainsFunc(tainted, func(n string) bool { return strings.HasPrefix(source, n+" ") }) {
			t.Errorf("evicted for a node taint: %s %s: %s", ev.Reason, ev.Regarding.Name, ev.Note)
		}
	}
}

// checkLifted waits until none of the nodes carries the drain taint of the
// dead plan, and checks that each got a DrainTaintLifted Event naming it.
func checkLifted(t *testing.T, e *testEnv, stale map[string]string) {
	t.Helper()
	nodes := slices.Sorted(func(yield func(string) bool) {
		for n := range stale {
			if !yield(n) {
				return
			}
		}
	})
	e.poll("the stale drain taints lifted", func() (bool, error) {
		for n, planID := range drainTaints(t, e, nodes) {
			if planID == stale[n] {
				return false, nil
			}
		}
		return true, nil
	})
	// Not fatal: what the run did besides is checked too.
	err := wait.PollUntilContextTimeout(e.ctx, pollEvery, 30*time.Second, true, func(context.Context) (bool, error) {
		evs, err := client.EventsV1().Events(metav1.NamespaceDefault).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		got := map[string]bool{}
		for _, ev := range evs.Items {
			if ev.Reason == executor.EventDrainTaintLifted && ev.Type == v1.EventTypeWarning && ev.Regarding.Kind == "Node" &&
				stale[ev.Regarding.Name] != "" && strings.Contains(ev.Note, "plan "+stale[ev.Regarding.Name]) {
				got[ev.Regarding.Name] = true
			}
		}
		return len(got) == len(stale), nil
	})
	if err != nil {
		t.Errorf("no DrainTaintLifted Event naming the dead plan on each of %v: %v", nodes, err)
	}
}

// TestFailoverLeaderKilledMidPlan: two `run --leader-elect` replicas, the
// leader evicting one pod a second; it is SIGKILLed after its third
// eviction, its drain taints still on the nodes its plan empties. The
// survivor takes the Lease and lifts those taints, each with a
// DrainTaintLifted Event, before it plans; it evicts no pod for them
// (RemovePodsViolatingNodeTaints); the move history holds every eviction
// made, the dead leader's included.
func TestFailoverLeaderKilledMidPlan(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	nodes := e.nodeNames("fo", 8)
	e.addNodes("8", nodes...)
	// Three pods of 1 CPU a node: three nodes hold them all, five are emptied.
	e.fragmentedReplicaSet("web", resources("1", "1Gi"), slices.Concat(nodes, nodes, nodes))
	places := e.trackPods()
	original := uidsOf(e.boundPods("web", 24))
	flag, historyName := e.historyFlag()
	lease := "rebalancer-" + e.name[len(e.name)-5:]
	started := time.Now()

	a := startReplicaWith(t, kubeconfig, lease, flag, "--max-evictions-per-second=1")
	a.waitUp(e, "the first replica to lead", a.leads)
	b := startReplicaWith(t, kubeconfig, lease, flag, "--max-evictions-per-second=1")

	// Kill the leader after its third eviction.
	evicted := func() int {
		pods, err := client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return 0
		}
		left := 0
		for _, p := range pods.Items {
			if original[string(p.UID)] && p.DeletionTimestamp == nil {
				left++
			}
		}
		return len(original) - left
	}
	a.waitUp(e, "three evictions", func() bool { return evicted() >= 3 })
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.done
	killed := time.Now()
	stale := drainTaints(t, e, nodes)
	t.Logf("leader killed after %d evictions; drain taints left on %d nodes: %v", evicted(), len(stale), stale)
	if len(stale) == 0 {
		t.Fatal("the dead leader left no drain taint: the test shows nothing")
	}
	if b.leads() {
		t.Fatal("the second replica led beside the first")
	}

	b.waitUp(e, "the survivor to lead", b.leads)
	t.Logf("the survivor leads %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	b.waitUp(e, "the survivor's first cycle", func() bool { return cycles(b, "ok")+cycles(b, "error") > 0 })
	b.terminate(t, 60*time.Second)

	checkLifted(t, e, stale)
	checkNoTaintEvictions(t, e)
	if log, err := os.ReadFile(b.log); err != nil {
		t.Fatal(err)
	} else if strings.Contains(string(log), `strategy="RemovePodsViolatingNodeTaints"`) {
		t.Error("the survivor's log names an eviction for a node taint")
	} else if !strings.Contains(string(log), "Removed a drain taint left by an earlier run") {
		t.Error("the survivor's log does not say it removed the stale drain taints")
	}
	n := checkHistoryHasEvictions(t, e, places, historyName, started)
	checkEvictions(t, e.ns, "none", started, namespaceLimit)
	checkNoDrainTaint(t, e)
	t.Logf("%d evictions in all", n)
}

// holdingProxy forwards every request to kube-apiserver; an eviction's
// answer, once the apiserver gave it, is held back from the client until
// the test ends: the pod is evicted, and the process does not know yet.
type holdingProxy struct {
	Kubeconfig string
	// evicted receives the path of each eviction the apiserver answered.
	evicted chan string
}

func newHoldingProxy(t *testing.T) *holdingProxy {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	p := &holdingProxy{evicted: make(chan string, 100)}
	release := make(chan struct{})
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isEviction(r) {
			rp.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r)
		p.evicted <- fmt.Sprintf("%s %d", r.URL.Path, rec.Code)
		select {
		case <-r.Context().Done():
		case <-release:
		}
		hangUp(w)
	}))
	srv.StartTLS()
	t.Cleanup(func() { close(release); srv.Close() })
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: srv.URL, CertificateAuthorityData: ca}
	kc.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	kc.CurrentContext = "proxy"
	p.Kubeconfig = filepath.Join(t.TempDir(), "holding-proxy.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFailoverKilledRightAfterEviction: `run --once` is SIGKILLed right
// after its first eviction went through, before the answer reached it
// (the proxy holds it): the move history holds that eviction all the same.
// The next `run --once` lifts the drain taints the dead run left, each with
// a DrainTaintLifted Event, evicts no pod for them, and the history holds
// every eviction of both runs.
func TestFailoverKilledRightAfterEviction(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	nodes := e.nodeNames("fk", 6)
	e.addNodes("8", nodes...)
	e.fragmentedReplicaSet("web", resources("1", "1Gi"), slices.Concat(nodes, nodes, nodes))
	places := e.trackPods()
	e.boundPods("web", 18)
	flag, historyName := e.historyFlag()
	proxy := newHoldingProxy(t)
	started := time.Now()

	p := startProcess(t, "rebalancer", "run", "--once", "--kubeconfig", proxy.Kubeconfig, flag,
		"--policy", filepath.Join(repoRoot, "policies", "binpacking-policy.yaml"),
		"--scheduler-config", filepath.Join(repoRoot, "policies", "binpacking-scheduler.yaml"))
	var first string
	select {
	case first = <-proxy.evicted:
	case <-p.done:
		t.Fatalf("run --once exited before its first eviction: %v\n%s", p.err, p.tail(20))
	case <-time.After(2 * time.Minute):
		t.Fatalf("no eviction within 2 minutes\n%s", p.tail(20))
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	if !strings.HasSuffix(first, " 201") {
		t.Fatalf("the first eviction was answered %q, want 201", first)
	}
	stale := drainTaints(t, e, nodes)
	t.Logf("killed with eviction %s answered, not yet known to the process; drain taints left: %v", first, stale)
	if got := evictionsOf(t, e.ns, started); len(got) != 1 {
		t.Fatalf("evictions before the kill %v, want exactly one", got)
	}
	if checkHistoryHasEvictions(t, e, places, historyName, started); t.Failed() {
		t.Error("the eviction made right before the kill is not in the history")
	}
	if len(stale) == 0 {
		t.Fatal("the dead run left no drain taint: the rest shows nothing")
	}

	// The next run: lifts the dead run's drain, evicts nothing for it.
	res, stderr, err := runOnceVia(t, kubeconfig, flag)
	if err != nil {
		t.Fatalf("the next run: %v\n%s", err, stderr)
	}
	for _, m := range res.Plan.Moves {
		if m.Strategy == "RemovePodsViolatingNodeTaints" {
			t.Errorf("the next run planned %s off %s for a node taint", m.Pod, m.Source)
		}
	}
	if !strings.Contains(stderr, "Removed a drain taint left by an earlier run") {
		t.Error("the next run does not log the stale drain taints it removed")
	}
	checkLifted(t, e, stale)
	checkNoTaintEvictions(t, e)
	n := checkHistoryHasEvictions(t, e, places, historyName, started)
	checkEvictions(t, e.ns, "none", started, namespaceLimit)
	checkNoDrainTaint(t, e)
	t.Logf("the next run evicted %d; %d evictions in all", len(res.Result.Evicted), n)
}
