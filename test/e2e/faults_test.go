//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// auditEvent is one request in the apiserver's audit log.
type auditEvent struct {
	Verb           string    `json:"verb"`
	UserAgent      string    `json:"userAgent"`
	RequestURI     string    `json:"requestURI"`
	Received       time.Time `json:"requestReceivedTimestamp"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

func (e auditEvent) code() int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// auditEvents returns the requests of user agents starting with agent since
// the given time, in the order the apiserver logged them.
func auditEvents(t *testing.T, agent string, since time.Time) []auditEvent {
	t.Helper()
	f, err := os.Open(envOr("AUDIT_LOG", filepath.Join(filepath.Dir(kubeconfig), "audit.log")))
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit log line: %v", err)
		}
		if strings.HasPrefix(ev.UserAgent, agent) && !ev.Received.Before(since) {
			out = append(out, ev)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkEvictions checks the audit log since the given time: no pod of the
// namespace evicted twice, none deleted, none of the protected app evicted
// (its PDB allows no disruption), and at most max evictions. It returns the
// number of evictions that happened.
func checkEvictions(t *testing.T, ns, protectedApp string, since time.Time, max int) int {
	t.Helper()
	done := map[string]int{}
	for _, ev := range auditEvents(t, "rebalancer/", since) {
		if !strings.Contains(ev.RequestURI, "/namespaces/"+ns+"/") {
			continue
		}
		switch {
		case ev.Verb == "delete" || ev.Verb == "deletecollection":
			t.Errorf("rebalancer deleted: %s", ev.RequestURI)
		case ev.Verb == "create" && strings.HasSuffix(ev.RequestURI, "/eviction") && ev.code() == http.StatusCreated:
			done[ev.RequestURI]++
			if strings.Contains(ev.RequestURI, "/pods/"+protectedApp+"-") {
				t.Errorf("evicted %s although its PDB allows no disruption", ev.RequestURI)
			}
		}
	}
	for uri, n := range done {
		if n > 1 {
			t.Errorf("%s: evicted %d times", uri, n)
		}
	}
	if len(done) > max {
		t.Errorf("%d evictions, more than the limit %d", len(done), max)
	}
	return len(done)
}

// faultCluster is the cluster of the fault tests: six nodes with two web
// pods each (room to consolidate), a db workload on the first whose PDB
// allows no disruption, and the last node under a maintenance taint.
func faultCluster(t *testing.T, prefix string) *testEnv {
	e := newTestEnv(t)
	var nodes []string
	for i := 0; i < 6; i++ {
		nodes = append(nodes, prefix+"-"+string(rune('a'+i)))
	}
	e.addNodes("8", nodes...)
	e.fragmentedReplicaSet("web", resources("1", "1Gi"), append(append([]string{}, nodes...), nodes...))
	e.fragmentedReplicaSet("db", resources("1", "1Gi"), nodes[:2])
	e.addPDB("db", 2)
	e.taintForMaintenance(nodes[5])
	return e
}

// runOnceVia runs `rebalancer run --once` with the given kubeconfig and
// returns its output and exit error (nil, or the *exec.ExitError).
func runOnceVia(t *testing.T, kc string, args ...string) (cycleOutput, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "rebalancer"), append([]string{"run", "--once", "-o", "json",
		"--kubeconfig", kc,
		"--policy", filepath.Join(repoRoot, "policies", "binpacking-policy.yaml"),
		"--scheduler-config", filepath.Join(repoRoot, "policies", "binpacking-scheduler.yaml")}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("rebalancer run --once: %v\n%s", err, stderr.String())
	}
	var res cycleOutput
	if len(out) > 0 {
		if jerr := json.Unmarshal(out, &res); jerr != nil {
			t.Fatalf("output is not JSON: %v\n%s\n%s", jerr, out, stderr.String())
		}
	}
	return res, stderr.String(), err
}

func checkNoDrainTaint(t *testing.T, e *testEnv) {
	t.Helper()
	nodes, err := client.CoreV1().Nodes().List(e.ctx, metav1.ListOptions{LabelSelector: testLabel + "=" + e.name})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		for _, taint := range n.Spec.Taints {
			if taint.Key == wellknown.DrainTaintKey {
				t.Errorf("node %s keeps the drain taint", n.Name)
			}
		}
	}
}

// The shipped policy's limit per namespace: every pod here is in one.
const namespaceLimit = 100

// TestRunOnceUnderFaults: one `run --once` whose API requests fail in every
// way a flaky apiserver fails them — the first pod read answers 500, the
// next is dropped, evictions get 429 twice, a 500, a reply lost
// after the eviction happened, and slow answers; a hint patch fails; a node
// patch is slow. (With client-go's WatchListClient an informer's first
// list is a watch too: the first two pod reads fail.) Nothing unsafe happens: no pod is evicted twice or deleted,
// the PDB holds, the limit holds, no drain taint is left. The next cycle,
// with the faults gone, completes.
func TestRunOnceUnderFaults(t *testing.T) {
	needScheduler(t)
	e := faultCluster(t, "fault")
	proxy := newFaultProxy(t)
	proxy.inject(
		&fault{name: "pod list 500", match: isPodRead, times: 1, status: http.StatusInternalServerError},
		&fault{name: "pod watch dropped", match: isPodRead, times: 1, drop: true},
		&fault{name: "eviction 429", match: isEviction, times: 2, status: http.StatusTooManyRequests},
		&fault{name: "eviction 500", match: isEviction, times: 1, status: http.StatusInternalServerError},
		&fault{name: "eviction reply lost", match: isEviction, times: 1, drop: true, afterForward: true},
		&fault{name: "eviction slow", match: isEviction, times: 2, delay: 2 * time.Second},
		&fault{name: "hint patch 500", match: isPodPatch, times: 1, status: http.StatusInternalServerError},
		&fault{name: "node patch slow", match: isNodePatch, times: 1, delay: time.Second},
	)

	started := time.Now()
	res, stderr, err := runOnceVia(t, proxy.Kubeconfig)
	proxy.checkInjected()
	faults := 0
	for _, r := range proxy.requests() {
		if r.fault != "" {
			faults++
		}
	}
	t.Logf("first run (exit %v): %d moves planned, %d evicted, %d skipped, %d errors; %d faults injected",
		err, len(res.Plan.Moves), len(res.Result.Evicted), len(res.Result.Skipped), res.Result.Errors, faults)
	if err != nil && res.Result.Errors == 0 {
		t.Errorf("run --once failed without a failed move: %v\n%s", err, stderr)
	}
	if strings.Contains(stderr, "panic") {
		t.Errorf("panic:\n%s", stderr)
	}
	first := checkEvictions(t, e.ns, "db", started, namespaceLimit)
	if first == 0 {
		t.Error("no eviction went through: the faults should slow the cycle, not stop it")
	}
	checkNoDrainTaint(t, e)

	// The faults are gone: the next cycle completes.
	proxy.clear()
	second := time.Now()
	res, stderr, err = runOnceVia(t, proxy.Kubeconfig)
	if err != nil {
		t.Fatalf("second run: %v\n%s", err, stderr)
	}
	n := checkEvictions(t, e.ns, "db", second, namespaceLimit)
	t.Logf("second run: %d moves planned, %d evicted", len(res.Plan.Moves), n)
	checkEvictions(t, e.ns, "db", started, 2*namespaceLimit)
	checkNoDrainTaint(t, e)
	// Every workload is whole again, its pods bound.
	e.boundPods("web", 12)
	e.boundPods("db", 2)
}

// TestSIGTERMMidCycle: SIGTERM while a cycle's evictions are under way (each
// held 1.5 s by the proxy). No eviction starts after the signal, the process
// exits promptly, and the drain taints it set are removed.
func TestSIGTERMMidCycle(t *testing.T) {
	needScheduler(t)
	e := faultCluster(t, "term")
	proxy := newFaultProxy(t)
	proxy.inject(&fault{name: "eviction slow", match: isEviction, delay: 1500 * time.Millisecond})

	p := startProcess(t, "rebalancer", "run", "--once",
		"--kubeconfig", proxy.Kubeconfig,
		"--policy", filepath.Join(repoRoot, "policies", "binpacking-policy.yaml"),
		"--scheduler-config", filepath.Join(repoRoot, "policies", "binpacking-scheduler.yaml"))
	e.poll("the first eviction", func() (bool, error) {
		for _, r := range proxy.requests() {
			if r.fault != "" {
				return true, nil
			}
		}
		return false, nil
	})
	signalled, _ := p.terminate(t, 30*time.Second)
	evictions, late := 0, 0
	for _, r := range proxy.requests() {
		if r.fault == "" {
			continue
		}
		evictions++
		if r.at.After(signalled) {
			late++
			t.Errorf("eviction %s started %s after SIGTERM", r.path, r.at.Sub(signalled))
		}
	}
	t.Logf("%d evictions started before SIGTERM, %d after", evictions-late, late)
	checkEvictions(t, e.ns, "db", signalled.Add(-time.Hour), namespaceLimit)
	checkNoDrainTaint(t, e)
}

// TestAPIServerRestartMidCycle: kube-apiserver is restarted while the
// long-lived mode's cycle is evicting. The daemon rides it out: its view of
// the cluster re-lists and watches again, a later cycle completes, no pod is
// evicted twice and the PDB holds. No pod is evicted for the drain taint of
// the cycle the restart cut short (only the maintenance taint's node is
// left by RemovePodsViolatingNodeTaints), and the move history holds every
// eviction the cluster saw.
func TestAPIServerRestartMidCycle(t *testing.T) {
	needScheduler(t)
	e := faultCluster(t, "restart")
	places := e.trackPods()
	historyFlag, historyName := e.historyFlag()
	proxy := newFaultProxy(t)
	proxy.inject(&fault{name: "eviction slow", match: isEviction, delay: time.Second})
	started := time.Now()

	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	// A replacement bound while the apiserver is down can be missed by the
	// drain guard's watch: its node then waits out --drain-timeout. The
	// history keeps moves for the cooldown, here longer than the test.
	r := &replica{process: startProcess(t, "rebalancer", "run", "--interval=3s", "--leader-elect=false", "--cooldown=1h", "--drain-timeout=10s",
		"--bind-address="+addr, "--kubeconfig", proxy.Kubeconfig, historyFlag,
		"--policy", filepath.Join(repoRoot, "policies", "binpacking-policy.yaml"),
		"--scheduler-config", filepath.Join(repoRoot, "policies", "binpacking-scheduler.yaml")), addr: addr}
	e.poll("the first eviction", func() (bool, error) {
		for _, req := range proxy.requests() {
			if req.fault != "" {
				return true, nil
			}
		}
		return false, nil
	})
	restart := exec.Command(filepath.Join(repoRoot, "hack", "local-cluster.sh"), "restart-apiserver")
	if out, err := restart.CombinedOutput(); err != nil {
		t.Fatalf("restarting kube-apiserver: %v\n%s", err, out)
	}
	restarted := time.Now()
	t.Logf("kube-apiserver restarted %s into the test", restarted.Sub(started).Round(100*time.Millisecond))

	// A cycle that starts after the restart completes.
	before := cycles(r, "ok")
	e.poll("a successful cycle after the restart", func() (bool, error) {
		select {
		case <-r.done:
			return false, errors.New("the daemon exited")
		default:
		}
		return cycles(r, "ok") >= before+2, nil
	})
	if code, _ := r.get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz %d after the restart", code)
	}
	n := checkEvictions(t, e.ns, "db", started, 1000)
	t.Logf("%d evictions; %d successful cycles", n, cycles(r, "ok"))
	checkNoDrainTaint(t, e)
	checkNoTaintEvictions(t, e, "restart-f")
	checkHistoryHasEvictions(t, e, places, historyName, started)
}

// cycles reads rebalancer_cycles_total{result=...} from a replica.
func cycles(r *replica, result string) int {
	_, body := r.get("/metrics")
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, `rebalancer_cycles_total{result="`+result+`"} `) {
			var n float64
			if _, err := fmt.Sscan(strings.TrimPrefix(line, `rebalancer_cycles_total{result="`+result+`"} `), &n); err == nil {
				return int(n)
			}
		}
	}
	return 0
}

// TestLeaderLosesLease: two replicas in long-lived mode, each reaching the
// apiserver through its own proxy. Once the leader's Lease renewals start
// failing, it stops evicting within the renew deadline and exits non-zero;
// the other replica takes over. No pod is evicted twice, the PDB holds.
func TestLeaderLosesLease(t *testing.T) {
	needScheduler(t)
	e := faultCluster(t, "lease")
	lease := "rebalancer-" + e.name[len(e.name)-5:]
	started := time.Now()
	pa, pb := newFaultProxy(t), newFaultProxy(t)
	a := startReplicaWith(t, pa.Kubeconfig, lease)
	e.poll("the first replica to lead", func() (bool, error) { return a.leads(), nil })
	b := startReplicaWith(t, pb.Kubeconfig, lease)
	e.poll("the second replica to be ready", func() (bool, error) { code, _ := b.get("/readyz"); return code == http.StatusOK, nil })
	if b.leads() {
		t.Fatal("two leaders")
	}

	renewal := func(r *http.Request) bool {
		return r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/leases/"+lease)
	}
	pa.inject(&fault{name: "lease renewal 500", match: renewal, status: http.StatusInternalServerError})
	faulted := time.Now()
	select {
	case <-a.done:
	case <-time.After(40 * time.Second):
		t.Fatal("the leader still runs 40 s after its renewals started failing")
	}
	t.Logf("the leader exited %s after its renewals started failing: %v", time.Since(faulted).Round(100*time.Millisecond), a.err)
	if a.err == nil {
		t.Error("the leader exited with status 0 after losing its Lease, want non-zero")
	}
	e.poll("the second replica to lead", func() (bool, error) { return b.leads(), nil })
	leads := time.Now()
	t.Logf("the second replica leads %s after the faults began", leads.Sub(faulted).Round(100*time.Millisecond))

	// The old leader gives up its renew deadline (10 s) after the first
	// renewal that failed, which begins within a retry period (2 s) of the
	// fault: no eviction of its may start later, nor once the other leads.
	const renewDeadline, retryPeriod = 10 * time.Second, 2 * time.Second
	for _, r := range pa.requests() {
		if isEviction(&http.Request{Method: r.method, URL: &url.URL{Path: r.path}}) && (r.at.After(faulted.Add(renewDeadline+retryPeriod)) || r.at.After(leads)) {
			t.Errorf("the old leader started eviction %s %s after its renewals began to fail, the other leading %s after", r.path, r.at.Sub(faulted), leads.Sub(faulted))
		}
	}
	n := checkEvictions(t, e.ns, "db", started, 1000)
	t.Logf("%d evictions in all", n)
}
