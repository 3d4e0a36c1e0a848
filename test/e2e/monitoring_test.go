//go:build e2e

package e2e

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/rebalancer-dev/rebalancer/pkg/extender"
	"github.com/rebalancer-dev/rebalancer/pkg/profile"
)

var seriesName = regexp.MustCompile(`\brebalancer_[a-z_]+\b`)

// alertRules reads manifests/monitoring/alerts.yaml: the PrometheusRule's
// spec and its rules, every group's.
func alertRules(t *testing.T) (spec map[string]any, rules []map[string]any) {
	t.Helper()
	obj := decodeAll(t, string(mustRead(t, filepath.Join(repoRoot, "manifests", "monitoring", "alerts.yaml"))))[0].Object
	spec = obj["spec"].(map[string]any)
	groups, _, _ := unstructured.NestedSlice(spec, "groups")
	for _, g := range groups {
		rs, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rs {
			rules = append(rules, r.(map[string]any))
		}
	}
	return spec, rules
}

// monitoredSeries lists the rebalancer series the shipped dashboard's panels
// and alert rules query.
func monitoredSeries(t *testing.T) []string {
	t.Helper()
	var dashboard struct {
		Panels []struct {
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(repoRoot, "manifests", "monitoring", "dashboard.json")), &dashboard); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, p := range dashboard.Panels {
		for _, target := range p.Targets {
			exprs = append(exprs, target.Expr)
		}
	}
	_, rules := alertRules(t)
	for _, r := range rules {
		exprs = append(exprs, r["expr"].(string))
	}
	seen := map[string]bool{}
	for _, e := range exprs {
		for _, name := range seriesName.FindAllString(e, -1) {
			seen[name] = true
		}
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// get fetches url, trusting the test's own self-signed endpoints.
func get(url string) (int, string, error) {
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the test's own self-signed endpoints
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), nil
}

// answers says whether url answers 200 OK.
func answers(url string) bool {
	code, _, err := get(url)
	return err == nil && code == http.StatusOK
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	code, body, err := get(url)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d: %s", url, code, body)
	}
	return body
}

// TestMonitoringSeriesExist: every rebalancer series the dashboard and the
// alerts query is on the /metrics of the binary that serves it: the
// long-lived rebalancer after a cycle that evicts, rebalancer-scheduler, the
// extender and the webhook after a request each.
func TestMonitoringSeriesExist(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	nodes := e.nodeNames("mon", 2)
	e.addNodes("8", nodes...)
	e.fragmentedReplicaSet("web", resources("1", "1Gi"), []string{nodes[0], nodes[1]})
	e.taintForMaintenance(nodes[0])

	var bodies []string
	// The extender and the webhook, each after one request.
	startExtender(t, e, kubeconfig)
	cfgPath, addr := clusterSchedulerConfig(t)
	cfg, err := profile.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := extender.Probe(e.ctx, cfg.Extenders[0]); err != nil {
		t.Fatal(err)
	}
	bodies = append(bodies, scrape(t, "http://"+addr+"/metrics"))
	_, whAddr := startWebhook(t, e)
	bodies = append(bodies, scrape(t, "https://"+whAddr+"/metrics"))

	// rebalancer-scheduler: a second process of the shipped profile, under
	// another name and without leader election, whose /metrics is open.
	port := freePort(t)
	config := schedulerConfig(t, "binpacking-scheduler.yaml", func(cfg map[string]any) {
		cfg["leaderElection"] = map[string]any{"leaderElect": false}
		cfg["profiles"].([]any)[0].(map[string]any)["schedulerName"] = "monitoring-" + e.name
	})
	sched := startProcess(t, "rebalancer-scheduler", "--config="+config, "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics")
	schedMetrics := fmt.Sprintf("https://127.0.0.1:%d/metrics", port)
	sched.waitUp(e, "rebalancer-scheduler's /metrics", func() bool { return answers(schedMetrics) })
	bodies = append(bodies, scrape(t, schedMetrics))

	// The long-lived rebalancer, after a cycle that moved the pod off the
	// tainted node.
	r := startReplica(t, "--policy", e.narrowedPolicy())
	// The cycle's own series are set when it ends, after its evictions.
	e.poll("a cycle that evicts, to its end", func() (bool, error) {
		return evictedCount(r) > 0 && cycles(r, "ok") > 0, nil
	})
	_, body := r.get("/metrics")
	bodies = append(bodies, body)
	// The daemon's runtime, as every binary's: its memory, and the garbage
	// collector's target it sets unless GOGC does (internal/gogc).
	for _, want := range []string{"\ngo_gc_gogc_percent 50\n", "\nprocess_resident_memory_bytes "} {
		if !strings.Contains(body, want) {
			t.Errorf("the daemon's /metrics lacks %q", strings.TrimSpace(want))
		}
	}

	all := "\n" + strings.Join(bodies, "\n")
	names := monitoredSeries(t)
	if len(names) < 10 {
		t.Fatalf("only %d series found in the dashboard and alerts: %v", len(names), names)
	}
	for _, name := range names {
		if !strings.Contains(all, "\n"+name+" ") && !strings.Contains(all, "\n"+name+"{") {
			t.Errorf("%s is queried by the dashboard or the alerts but served by no binary", name)
		}
	}
	if !t.Failed() {
		t.Logf("%d series queried, all served: %s", len(names), strings.Join(names, " "))
	}
}

// alertCase is one promtool rule test: series, and whether the alert fires
// at evalTime.
type alertCase struct {
	alert    string
	series   map[string]string // series -> promtool values
	evalTime string
	fires    bool
}

var alertCases = []alertCase{
	{"RebalancerCyclesFailing", map[string]string{`rebalancer_cycles_total{result="error"}`: "0+1x120", `rebalancer_cycles_total{result="ok"}`: "5x120"}, "90m", true},
	{"RebalancerCyclesFailing", map[string]string{`rebalancer_cycles_total{result="error"}`: "0+1x120", `rebalancer_cycles_total{result="ok"}`: "0+1x120"}, "90m", false},
	{"RebalancerEvictionsBlockedByPDB", map[string]string{`rebalancer_skips_total{reason="pdb"}`: "0+1x480", `rebalancer_evictions_total{strategy="HighNodeUtilization",result="evicted"}`: "7x480"}, "7h", true},
	{"RebalancerEvictionsBlockedByPDB", map[string]string{`rebalancer_skips_total{reason="pdb"}`: "0+1x480", `rebalancer_evictions_total{strategy="HighNodeUtilization",result="evicted"}`: "0+1x480"}, "7h", false},
	{"RebalancerDrainTaintLeftBehind", map[string]string{`rebalancer_drain_taints_left_behind_total`: "0x30 1x30"}, "40m", true},
	{"RebalancerDrainTaintLeftBehind", map[string]string{`rebalancer_drain_taints_left_behind_total`: "0x60"}, "40m", false},
	{"RebalancerDrainTimeouts", map[string]string{`rebalancer_drain_timeouts_total`: "0x30 5x30"}, "40m", true},
	{"RebalancerDrainTimeouts", map[string]string{`rebalancer_drain_timeouts_total`: "0x30 1x30"}, "40m", false},
	{"RebalancerNoLeader", map[string]string{`rebalancer_leader{pod="a"}`: "0x30", `rebalancer_leader{pod="b"}`: "0x30"}, "20m", true},
	{"RebalancerNoLeader", map[string]string{`rebalancer_leader{pod="a"}`: "0x30", `rebalancer_leader{pod="b"}`: "1x30"}, "20m", false},
}

// TestAlertRules: the PrometheusRule's rules pass `promtool check rules`
// (promtool built from the Prometheus module), and `promtool test rules`
// fires each alert on the series that mean trouble, and not on their
// healthy twin.
func TestAlertRules(t *testing.T) {
	promtool := filepath.Join(binDir, "promtool")
	ruleSpec, rules := alertRules(t)
	spec, err := yaml.Marshal(ruleSpec)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), spec, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("check", "rules", "rules.yaml")

	annotations := map[string]map[string]any{}
	labels := map[string]map[string]any{}
	for _, rule := range rules {
		annotations[rule["alert"].(string)] = rule["annotations"].(map[string]any)
		labels[rule["alert"].(string)] = rule["labels"].(map[string]any)
	}
	var tests []any
	fired := map[string]bool{}
	for _, c := range alertCases {
		var series []any
		for s, v := range c.series {
			series = append(series, map[string]any{"series": s, "values": v})
		}
		var exp []any
		if c.fires {
			fired[c.alert] = true
			exp = append(exp, map[string]any{"exp_labels": labels[c.alert], "exp_annotations": annotations[c.alert]})
		}
		tests = append(tests, map[string]any{
			"interval": "1m", "input_series": series,
			"alert_rule_test": []any{map[string]any{"eval_time": c.evalTime, "alertname": c.alert, "exp_alerts": exp}},
		})
	}
	for alert := range annotations {
		if !fired[alert] {
			t.Errorf("alert %s has no case that fires it", alert)
		}
	}
	data, err := yaml.Marshal(map[string]any{"rule_files": []string{"rules.yaml"}, "evaluation_interval": "1m", "tests": tests})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules_test.yaml"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	run("test", "rules", "rules_test.yaml")
}
