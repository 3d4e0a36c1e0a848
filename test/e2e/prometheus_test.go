//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/rebalancer-dev/rebalancer/pkg/live"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// nodeCPUQuery is the recording rule LowNodeUtilization's documentation
// queries: each node's CPU in use, as a share of the node. KWOK serves the
// kubelet's resource metrics, so the rule is built on
// node_cpu_usage_seconds_total; every node of the test has 4 CPUs.
const nodeCPUQuery = "instance:node_cpu:rate:sum"

// startPrometheus runs a Prometheus server, built from its module, that
// scrapes KWOK's emulated kubelet resource metrics of nodes every 5 s,
// each labelled instance=<node name>, and records nodeCPUQuery. It
// returns the server's URL.
func startPrometheus(t *testing.T, nodes []string) string {
	t.Helper()
	dir := t.TempDir()
	n, err := client.CoreV1().Nodes().Get(context.Background(), nodes[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// KWOK answers as every node's kubelet on one port, plain HTTP too.
	kwok := fmt.Sprintf("127.0.0.1:%d", n.Status.DaemonEndpoints.KubeletEndpoint.Port)
	var targets strings.Builder
	for _, node := range nodes {
		fmt.Fprintf(&targets, "  - targets: [%q]\n    labels: {__metrics_path__: /metrics/nodes/%s/metrics/resource, instance: %s}\n", kwok, node, node)
	}
	config := fmt.Sprintf(`global: {scrape_interval: 5s, evaluation_interval: 5s}
rule_files: [rules.yaml]
scrape_configs:
- job_name: kubelet-resource
  static_configs:
%s`, targets.String())
	rules := fmt.Sprintf(`groups:
- name: descheduler
  rules:
  - record: %s
    expr: sum by (instance) (rate(node_cpu_usage_seconds_total[30s])) / 4
`, nodeCPUQuery)
	for name, text := range map[string]string{"prometheus.yaml": config, "rules.yaml": rules} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, "prometheus", "--config.file="+filepath.Join(dir, "prometheus.yaml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	server := "http://" + addr
	err = wait.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, true, func(context.Context) (bool, error) {
		resp, err := http.Get(server + "/-/ready")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("Prometheus at %s not ready: %v", server, err)
	}
	return server
}

// queryValues asks server query now and returns each instance's value.
func queryValues(server, query string) (map[string]float64, error) {
	resp, err := http.Get(server + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var answer struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range answer.Data.Result {
		var v float64
		if _, err := fmt.Sscan(s.Value[1].(string), &v); err != nil {
			return nil, err
		}
		out[s.Metric["instance"]] = v
	}
	return out, nil
}

// tokenProxy fronts server with a proxy that refuses a request without
// the bearer token, as a Prometheus behind kube-rbac-proxy does.
func tokenProxy(t *testing.T, server, token string) string {
	t.Helper()
	target, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// prometheusPolicy is LowNodeUtilization by a Prometheus query, written as
// the descheduler documents it, on the test's nodes.
func prometheusPolicy(t *testing.T, e *testEnv, server, query string) string {
	t.Helper()
	text := fmt.Sprintf(`apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
nodeSelector: %s=%s
metricsProviders:
- source: Prometheus
  prometheus:
    url: %s
    authToken:
      secretReference: {namespace: rebalancer-system, name: prometheus-auth-token}
profiles:
- name: by-prometheus
  pluginConfig:
  - name: DefaultEvictor
  - name: LowNodeUtilization
    args:
      thresholds: {MetricResource: 30}
      targetThresholds: {MetricResource: 70}
      metricsUtilization:
        source: Prometheus
        prometheus: {query: %q}
  plugins:
    balance:
      enabled: [LowNodeUtilization]
`, testLabel, e.name, server, query)
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPrometheusProvider: a LowNodeUtilization reading a Prometheus query,
// against a Prometheus server built from its module scraping KWOK's
// emulated kubelets, behind a proxy that wants the token of the Secret the
// policy names. Four nodes of default-scheduler's pods; one runs three
// busy pods (90 % of its CPU by the query), the others one or two idle
// pods.
// Bad provider settings and queries are refused naming what is wrong, with
// nothing evicted; a snapshot records the query's answer and plans as the
// live cluster does; `run --once`, as the shipped ServiceAccount with the
// optional token RBAC, moves one pod off the hot node (upstream's rule for
// a query, which says nothing of a pod's share) and no replacement lands
// back on it.
func TestPrometheusProvider(t *testing.T) {
	e := newTestEnv(t)
	nodes := e.nodeNames("prom", 4)
	hot := nodes[0]
	e.addNodes("4", nodes...)
	// default-scheduler does not follow hints: a move is planned only where
	// it surely places the replacement, here the least requested node.
	e.fragmentedReplicaSetWith("default-scheduler", "busy", resources("1", "1Gi"), using("1200m"), []string{hot, hot, hot})
	e.fragmentedReplicaSetWith("default-scheduler", "idle", resources("1", "1Gi"), using("100m"), []string{nodes[1], nodes[2], nodes[2], nodes[3], nodes[3]})
	busy, idle := e.boundPods("busy", 3), e.boundPods("idle", 5)
	all := append(busy, idle...)
	_, layout := perNode(all)
	t.Logf("placed: %s", layout)

	server := startPrometheus(t, nodes)
	var values map[string]float64
	err := wait.PollUntilContextTimeout(e.ctx, 2*time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		var err error
		values, err = queryValues(server, nodeCPUQuery)
		return err == nil && len(values) == len(nodes) && values[hot] > 0.8, nil
	})
	if err != nil {
		t.Fatalf("waiting for Prometheus to record %s for the nodes, %s above 0.8: %v (last answer %v)", nodeCPUQuery, hot, err, values)
	}
	t.Logf("%s: %v", nodeCPUQuery, values)

	const token = "e2e-prometheus-token"
	proxied := tokenProxy(t, server, token)
	kc := e.asServiceAccount(filepath.Join(repoRoot, "manifests", "rebalancer", "rbac.yaml"), "rebalancer")
	kubectl(t, "apply", "--server-side", "--field-manager=rebalancer-e2e", "-f", filepath.Join(repoRoot, "manifests", "rebalancer", "prometheus-token-rbac.yaml"))
	profile := filepath.Join(repoRoot, "policies", "balancing-scheduler.yaml")
	good := prometheusPolicy(t, e, proxied, nodeCPUQuery)

	// The descheduler's own examples that read Prometheus, unchanged: its
	// README's example policy configures the provider and no plugin, its
	// LowNodeUtilization example with metricsUtilization uncommented has no
	// provider. Both are refused before Prometheus is asked anything.
	for file, want := range map[string]string{
		"example-policy-filled.yaml":         "would evict nothing",
		"lownodeutilization-prometheus.yaml": "reads Prometheus, which the policy does not provide",
	} {
		_, stderr, err := rebalancerOutput(kc, "plan", "--policy", filepath.Join(repoRoot, "pkg", "policy", "testdata", file), "--scheduler-config", profile)
		if err == nil || !strings.Contains(stderr, want) {
			t.Errorf("upstream example %s: %v; stderr lacks %q:\n%s", file, err, want, stderr)
		}
		t.Logf("upstream example %s: %s", file, lastLine(stderr))
	}

	// Refused, naming what is wrong; nothing evicted.
	missing := "metricsProviders[0].prometheus.authToken.secretReference: Secret rebalancer-system/prometheus-auth-token: not found"
	if _, stderr, err := rebalancerOutput(kc, "run", "--once", "--policy", good, "--scheduler-config", profile); err == nil || !strings.Contains(stderr, missing) {
		t.Errorf("no token Secret yet: run --once: %v; stderr lacks %q:\n%s", err, missing, stderr)
	}
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "rebalancer-system", Name: "prometheus-auth-token"},
		Data: map[string][]byte{live.PrometheusAuthTokenKey: []byte(token)}}
	if _, err := client.CoreV1().Secrets("rebalancer-system").Create(e.ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Secrets("rebalancer-system").Delete(context.Background(), secret.Name, metav1.DeleteOptions{})
	})
	field := "profiles[0].pluginConfig[LowNodeUtilization].args.metricsUtilization.prometheus.query"
	for _, tc := range []struct {
		name, policy string
		want         []string
	}{
		{"unreachable provider", prometheusPolicy(t, e, fmt.Sprintf("http://127.0.0.1:%d", freePort(t)), nodeCPUQuery),
			[]string{field, "from the Prometheus of metricsProviders[0]", "connection refused"}},
		{"without the proxy's token", prometheusPolicy(t, e, tokenProxy(t, server, "another-token"), nodeCPUQuery),
			[]string{field, "401"}},
		{"wrong query", prometheusPolicy(t, e, proxied, nodeCPUQuery+" *"),
			[]string{field, "bad_data", "parse error"}},
		{"some nodes missing", prometheusPolicy(t, e, proxied, fmt.Sprintf("%s{instance=%q}", nodeCPUQuery, hot)),
			[]string{field, "has no sample for 3 of 4 node(s)", "it has samples of instance(s) " + hot}},
		{"not a share of the node", prometheusPolicy(t, e, proxied, nodeCPUQuery+" * 4"),
			[]string{field, "must be a share of the node, in [0, 1]"}},
	} {
		_, stderr, err := rebalancerOutput(kc, "run", "--once", "--policy", tc.policy, "--scheduler-config", profile)
		if err == nil {
			t.Errorf("%s: run --once succeeded", tc.name)
		}
		for _, want := range tc.want {
			if !strings.Contains(stderr, want) {
				t.Errorf("%s: stderr lacks %q:\n%s", tc.name, want, stderr)
			}
		}
		t.Logf("%s: %s", tc.name, lastLine(stderr))
	}
	before := uidsOf(all)
	if now := uidsOf(append(e.boundPods("busy", 3), e.boundPods("idle", 5)...)); !maps.Equal(now, before) {
		t.Fatalf("a refused run evicted pods: before %v, after %v", before, now)
	}

	// The snapshot records the answer; offline, it plans as live.
	snapPath := filepath.Join(t.TempDir(), "cluster.yaml")
	capture := exec.CommandContext(e.ctx, filepath.Join(binDir, "rebalancer"), "snapshot", "capture", "--kubeconfig", kc, "--policy", good, "--output", snapPath)
	if out, err := capture.CombinedOutput(); err != nil {
		t.Fatalf("snapshot capture: %v\n%s", err, out)
	}
	snap, err := snapshot.Load(snapPath)
	if err != nil {
		t.Fatal(err)
	}
	recorded := snap.PrometheusQuery(nodeCPUQuery)
	if recorded == nil || recorded.Values()[hot] < 0.8 {
		t.Fatalf("snapshot's answer to %s: %+v; want %s above 0.8", nodeCPUQuery, recorded, hot)
	}
	var offline plan.Plan
	out, err := exec.CommandContext(e.ctx, filepath.Join(binDir, "rebalancer"), "plan", "-o", "json", "--policy", good, "--scheduler-config", profile, "--snapshot", snapPath).Output()
	if err != nil || json.Unmarshal(out, &offline) != nil {
		t.Fatalf("offline plan: %v\n%s", err, out)
	}
	if len(offline.Moves) != 1 || offline.Moves[0].Source != hot || offline.Moves[0].Target != nodes[1] {
		t.Errorf("offline plan: moves %+v (skipped %v), want one off %s onto %s", offline.Moves, offline.Summary.SkippedByReason, hot, nodes[1])
	}

	var res cycleOutput
	rebalancerJSON(t, kc, &res, "run", "--once", "--policy", good, "--scheduler-config", profile)
	moves := res.Plan.Moves
	if len(moves) != 1 || moves[0].Source != hot || moves[0].Target != nodes[1] || !strings.HasPrefix(moves[0].Name, "busy-") || moves[0].Scheduler != "default-scheduler" {
		t.Fatalf("moves %+v (skipped %v), want one busy pod of default-scheduler off %s, onto %s", moves, res.Plan.Summary.SkippedByReason, hot, nodes[1])
	}
	if len(res.Result.Evicted) != 1 {
		t.Fatalf("evicted %d pods, want the 1 planned; result %+v", len(res.Result.Evicted), res.Result)
	}
	var queried []plan.Queried
	for _, n := range res.Plan.Summary.PerNode {
		if n.Node == hot {
			queried = n.Queried
		}
	}
	if len(queried) != 1 || queried[0].Query != nodeCPUQuery || queried[0].Value < 0.8 {
		t.Errorf("the plan's value of %s for %s: %+v", nodeCPUQuery, hot, queried)
	}
	after := e.boundPods("busy", 3)
	for _, p := range after {
		if before[string(p.UID)] {
			continue
		}
		if p.Spec.NodeName == hot {
			t.Errorf("replacement %s landed back on the hot node %s", p.Name, hot)
		}
		if p.Spec.NodeName != moves[0].Target {
			t.Errorf("replacement %s landed on %s, planned on %s", p.Name, p.Spec.NodeName, moves[0].Target)
		}
	}
	_, layout = perNode(append(after, e.boundPods("idle", 5)...))
	t.Logf("after: %s", layout)

	// Once the query's range has passed, the hot node is under the target
	// and a second plan moves nothing.
	err = wait.PollUntilContextTimeout(e.ctx, 2*time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		values, err = queryValues(server, nodeCPUQuery)
		return err == nil && values[hot] < 0.65, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s to cool by the query: %v (last answer %v)", hot, err, values)
	}
	t.Logf("%s after: %v", nodeCPUQuery, values)
	var again plan.Plan
	rebalancerJSON(t, kc, &again, "plan", "--policy", good, "--scheduler-config", profile)
	if len(again.Moves) != 0 {
		t.Errorf("a second plan moves %d pods: %+v", len(again.Moves), again.Moves)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
