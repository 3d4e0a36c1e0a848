//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

var chartDir = filepath.Join("manifests", "helm", "rebalancer")

// helm runs the helm binary built from its pinned module (hack/tools/helm).
func helm(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "helm"), args...)
	cmd.Dir = repoRoot
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// chartModes are the chart's values for each kustomize variant of
// manifests/, with what the variant adds on top.
var chartModes = []struct {
	variant string
	values  []string
}{
	{"cronjob", []string{"mode=cronjob"}},
	{"job", []string{"mode=job"}},
	{"deployment", []string{"mode=deployment"}},
}

// renderChart renders the chart into rebalancer-system with the values set.
func renderChart(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", "rebalancer", chartDir, "--namespace", "rebalancer-system"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return decodeAll(t, helm(t, args...))
}

// Helm's own labels and the pods' checksum annotation are the chart's
// additions; kustomize names its generated ConfigMap with a content hash.
var (
	helmLabels   = []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/part-of", "app.kubernetes.io/version", "helm.sh/chart"}
	generatedMap = regexp.MustCompile(`^rebalancer-policies-[a-z0-9]{10}$`)
)

// normalize drops what only Helm or only kustomize adds, and keys objects
// by kind, namespace and name.
func normalize(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, u := range objs {
		if u.GetKind() == "Namespace" {
			continue // Helm installs into the release's namespace (--create-namespace)
		}
		labels := u.GetLabels()
		for _, k := range helmLabels {
			delete(labels, k)
		}
		if len(labels) == 0 {
			labels = nil
		}
		u.SetLabels(labels)
		obj := renameGenerated(u.Object)
		dropChecksum(obj)
		data, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		var clean any
		if err := yaml.Unmarshal(data, &clean); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), renameName(u.GetName()))] = clean
	}
	return out
}

func renameName(name string) string {
	if generatedMap.MatchString(name) {
		return "rebalancer-policies"
	}
	return name
}

// renameGenerated replaces the generated ConfigMap's name wherever it is
// used (its own metadata, pods' volumes).
func renameGenerated(v any) map[string]any {
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
			return x
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
			return x
		case string:
			return renameName(x)
		}
		return v
	}
	return walk(v).(map[string]any)
}

// dropChecksum removes the pod templates' checksum/policies annotation.
func dropChecksum(v any) {
	switch x := v.(type) {
	case map[string]any:
		if a, ok := x["annotations"].(map[string]any); ok {
			delete(a, "checksum/policies")
			if len(a) == 0 {
				delete(x, "annotations")
			}
		}
		for _, e := range x {
			dropChecksum(e)
		}
	case []any:
		for _, e := range x {
			dropChecksum(e)
		}
	}
}

// TestChartRendersTheKustomizeTree: for each mode, the chart with its
// defaults renders the same objects as the kustomize variant (and with the
// extender and webhook on, the same as manifests/extender and
// manifests/webhook beside it), field by field, but for Helm's labels, the
// pods' checksum annotation, the generated ConfigMap's hash suffix and the
// Namespace. The chart's copies of policies/ and the RBAC files are the
// originals byte for byte.
func TestChartRendersTheKustomizeTree(t *testing.T) {
	for _, c := range []struct{ from, to string }{
		{"manifests/rebalancer/rbac.yaml", "files/rbac/rebalancer.yaml"},
		{"manifests/scheduler/rbac.yaml", "files/rbac/scheduler.yaml"},
		{"manifests/extender/rbac.yaml", "files/rbac/extender.yaml"},
		{"manifests/monitoring/dashboard.json", "files/monitoring/dashboard.json"},
		{"manifests/monitoring/alerts.yaml", "files/monitoring/alerts.yaml"},
	} {
		sameFile(t, c.from, filepath.Join(chartDir, c.to))
	}
	shipped, err := filepath.Glob(filepath.Join(repoRoot, "policies", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	copies := 0
	for _, p := range shipped {
		if filepath.Base(p) == "kustomization.yaml" {
			continue
		}
		sameFile(t, filepath.Join("policies", filepath.Base(p)), filepath.Join(chartDir, "files", "policies", filepath.Base(p)))
		copies++
	}
	if entries, _ := os.ReadDir(filepath.Join(repoRoot, chartDir, "files", "policies")); len(entries) != copies {
		t.Errorf("manifests/helm/rebalancer/files/policies holds %d files, policies/ %d", len(entries), copies)
	}

	for _, m := range chartModes {
		t.Run(m.variant, func(t *testing.T) {
			compare(t, normalize(t, decodeAll(t, kubectl(t, "kustomize", filepath.Join(repoRoot, "manifests", m.variant)))), normalize(t, renderChart(t, m.values...)))
		})
	}
	t.Run("extender, webhook and monitoring", func(t *testing.T) {
		kustomized := decodeAll(t, kubectl(t, "kustomize", filepath.Join(repoRoot, "manifests", "cronjob")))
		for _, dir := range []string{"extender", "webhook", "monitoring"} {
			kustomized = append(kustomized, decodeAll(t, kubectl(t, "kustomize", filepath.Join(repoRoot, "manifests", dir)))...)
		}
		want := normalize(t, kustomized)
		got := normalize(t, renderChart(t, "extender.enabled=true", "webhook.enabled=true", "dashboard.enabled=true", "prometheusRule.enabled=true"))
		// With the extender, the rebalancer also models default-scheduler
		// with the extender's snippet: the one argument the chart adds.
		cron := want["CronJob rebalancer-system/rebalancer"]
		containers, _, _ := unstructured.NestedFieldNoCopy(cron.(map[string]any), "spec", "jobTemplate", "spec", "template", "spec", "containers")
		container := containers.([]any)[0].(map[string]any)
		args := container["args"].([]any)
		container["args"] = append(append(append([]any{}, args[:4]...), "--scheduler-config=/etc/rebalancer/default-scheduler-extender.yaml"), args[4:]...)
		compare(t, want, got)
	})
}

func sameFile(t *testing.T, original, copied string) {
	t.Helper()
	a, err := os.ReadFile(filepath.Join(repoRoot, original))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(repoRoot, copied))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("%s differs from %s: run `make chart`", copied, original)
	}
}

func compare(t *testing.T, want, got map[string]any) {
	t.Helper()
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		w, inWant := want[k]
		g, inGot := got[k]
		switch {
		case !inGot:
			t.Errorf("the chart does not render %s", k)
		case !inWant:
			t.Errorf("the chart renders %s, which kustomize does not", k)
		case !reflect.DeepEqual(w, g):
			wy, _ := yaml.Marshal(w)
			gy, _ := yaml.Marshal(g)
			t.Errorf("%s differs:\nkustomize:\n%s\nchart:\n%s", k, wy, gy)
		}
	}
}

// TestChartLintAndDryRun: `helm lint` passes in every mode, and every
// rendering (each mode; the extender, the webhook and the other namespace)
// applies to the real apiserver with server-side dry-run and strict
// validation. Installed elsewhere than rebalancer-system, nothing names
// rebalancer-system any more. Bad values are refused by name.
func TestChartLintAndDryRun(t *testing.T) {
	renders := [][]string{{"mode=cronjob"}, {"mode=job"}, {"mode=deployment", "pair=balancing"},
		{"mode=deployment", "extender.enabled=true", "webhook.enabled=true"}}
	for _, set := range renders {
		t.Run(strings.Join(set, " "), func(t *testing.T) {
			args := []string{"lint", chartDir, "--strict"}
			for _, s := range set {
				args = append(args, "--set", s)
			}
			helm(t, args...)
			args = []string{"template", "rebalancer", chartDir, "--namespace", "rebalancer-system"}
			for _, s := range set {
				args = append(args, "--set", s)
			}
			path := filepath.Join(t.TempDir(), "rendered.yaml")
			if err := os.WriteFile(path, []byte(helm(t, args...)), 0o600); err != nil {
				t.Fatal(err)
			}
			out := kubectl(t, "apply", "--server-side", "--dry-run=server", "--field-manager=rebalancer-e2e", "--validate=strict", "-f", path)
			if !strings.Contains(out, "deployment.apps/rebalancer-scheduler") {
				t.Errorf("dry-run output lacks the scheduler:\n%s", out)
			}
			for _, u := range decodeAll(t, string(mustRead(t, path))) {
				switch u.GetKind() {
				case "Deployment", "Job", "CronJob":
					checkPodSpec(t, u.GetKind()+"/"+u.GetName(), podSpecOf(t, u))
				}
			}
		})
	}

	t.Run("another namespace", func(t *testing.T) {
		out := helm(t, "template", "rebalancer", chartDir, "--namespace", "ops", "--set", "mode=deployment",
			"--set", "extender.enabled=true", "--set", "webhook.enabled=true", "--set", "webhook.certManager=true", "--set", "serviceMonitor.enabled=true",
			"--set", "dashboard.enabled=true", "--set", "prometheusRule.enabled=true")
		if i := strings.Index(out, "rebalancer-system"); i >= 0 {
			t.Errorf("rendered into ops, the chart still names rebalancer-system: …%s…", out[max(0, i-200):min(len(out), i+100)])
		}
		for _, want := range []string{"--history-configmap=ops/rebalancer-history", "--leader-elect-resource-namespace=ops", "resourceNamespace: ops", "rebalancer-extender.ops.svc", "kind: ServiceMonitor"} {
			if !strings.Contains(out, want) {
				t.Errorf("rendered into ops, the chart lacks %q", want)
			}
		}
	})

	t.Run("bad values", func(t *testing.T) {
		for set, want := range map[string]string{"mode=daemon": `mode "daemon": want cronjob, job or deployment`, "pair=spreading": `pair "spreading": want binpacking, balancing or load-aware`} {
			cmd := exec.Command(filepath.Join(binDir, "helm"), "template", "rebalancer", chartDir, "--set", set)
			cmd.Dir = repoRoot
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), want) {
				t.Errorf("--set %s: %v %s, want an error with %q", set, err, out, want)
			}
		}
	})
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestChartDeploymentMode: the chart's Deployment mode as it runs. Its
// rendered RBAC is applied for real, its rendered ConfigMap's files are the
// replicas' /etc/rebalancer, and two replicas run with the rendered
// container's arguments as the rendered ServiceAccount: one leads, cycles
// run, /metrics is served, and every request they make is one the chart's
// ClusterRole and Role grant, every rule used (but those
// rebalancerNotExercised lists).
func TestChartDeploymentMode(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	// A node under maintenance and thin nodes (Consolidation drains one):
	// a cycle uses every rule.
	nodes := e.nodeNames("chart", 4)
	e.addNodes("8", nodes...)
	e.fragmentedReplicaSet("web", resources("1", "1Gi"), nodes)
	e.taintForMaintenance(nodes[0])
	objs := renderChart(t, "mode=deployment")
	dir := t.TempDir()
	var args []string
	var rbac []*unstructured.Unstructured
	for _, u := range objs {
		switch {
		case u.GetKind() == "ConfigMap" && u.GetName() == "rebalancer-policies":
			data, _, _ := unstructured.NestedStringMap(u.Object, "data")
			for name, content := range data {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		case u.GetKind() == "Deployment" && u.GetName() == "rebalancer":
			spec := podSpecOf(t, u)
			args = spec.Containers[0].Args
		case strings.Contains(u.GetKind(), "Role") || u.GetKind() == "ServiceAccount":
			if name := u.GetName(); name == "rebalancer" {
				rbac = append(rbac, u)
			}
		}
	}
	if len(args) == 0 || len(rbac) != 5 {
		t.Fatalf("rendered: args %q, %d RBAC objects named rebalancer (want ServiceAccount, ClusterRole, ClusterRoleBinding, Role, RoleBinding)", args, len(rbac))
	}
	var manifest strings.Builder
	for _, u := range rbac {
		data, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		manifest.WriteString("---\n")
		manifest.Write(data)
	}
	path := filepath.Join(t.TempDir(), "rbac.yaml")
	if err := os.WriteFile(path, []byte(manifest.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	kc := e.asServiceAccount(path, "rebalancer")

	// The rendered arguments, with the mounted files where the test put them.
	start := func() *replica {
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		var run []string
		for _, a := range args {
			a = strings.ReplaceAll(a, "/etc/rebalancer/", dir+"/")
			if strings.HasPrefix(a, "--bind-address=") {
				a = "--bind-address=" + addr
			}
			run = append(run, a)
		}
		// A short interval, and no per-workload limit: the chart's 25%
		// would spread this small cluster's moves over many cycles.
		return &replica{process: startProcess(t, "rebalancer", append(run, "--kubeconfig", kc, "--interval=2s", "--max-per-workload=0")...), addr: addr}
	}
	started := time.Now()
	a, b := start(), start()
	e.poll("one replica to lead", func() (bool, error) { return a.leads() != b.leads(), nil })
	leader := a
	if b.leads() {
		leader = b
	}
	e.poll("a cycle that evicts", func() (bool, error) { return evictedCount(leader) > 0 && cycles(leader, "ok") > 0, nil })
	for _, r := range []*replica{a, b} {
		r.terminate(t, 20*time.Second)
	}
	used := auditedVerbs(t, "system:serviceaccount:rebalancer-system:rebalancer", started)
	notExercised := map[string]string{"update configmaps": "a move history that exists already (on a fresh cluster this run creates it)"}
	for k, v := range rebalancerNotExercised {
		notExercised[k] = v
	}
	checkRBAC(t, "rebalancer/rbac.yaml", used, notExercised)
}

// The CRDs of the objects the manifests render for other operators, from
// those operators' own modules (the Go module proxy), pinned.
var operatorCRDs = []struct{ module, file string }{
	{"github.com/prometheus-operator/prometheus-operator@v0.85.0", "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"},
	{"github.com/prometheus-operator/prometheus-operator@v0.85.0", "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml"},
	{"github.com/cert-manager/cert-manager@v1.21.2", "deploy/crds/cert-manager.io_issuers.yaml"},
	{"github.com/cert-manager/cert-manager@v1.21.2", "deploy/crds/cert-manager.io_certificates.yaml"},
}

// installOperatorCRDs applies operatorCRDs to the test cluster and waits
// until they are served.
func installOperatorCRDs(t *testing.T) {
	t.Helper()
	dirs := map[string]string{}
	for _, c := range operatorCRDs {
		if _, ok := dirs[c.module]; !ok {
			cmd := exec.Command("go", "mod", "download", "-json", c.module)
			cmd.Dir = t.TempDir() // outside any module
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go mod download %s: %v", c.module, err)
			}
			var m struct{ Dir string }
			if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
				t.Fatalf("go mod download %s: %v %s", c.module, err, out)
			}
			dirs[c.module] = m.Dir
		}
		kubectl(t, "apply", "--server-side", "--field-manager=rebalancer-e2e", "-f", filepath.Join(dirs[c.module], c.file))
	}
	kubectl(t, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com", "crd/issuers.cert-manager.io", "crd/certificates.cert-manager.io")
}

// TestOperatorObjectsDryRun: what the manifests render for the Prometheus
// Operator and cert-manager (ServiceMonitors, the PrometheusRule, the
// webhook's Issuer and Certificate) applies with server-side dry-run and
// strict validation against those operators' own CRDs: from the chart with
// everything on, and from manifests/monitoring and manifests/webhook-cert-manager.
func TestOperatorObjectsDryRun(t *testing.T) {
	installOperatorCRDs(t)
	dryRun := func(t *testing.T, args []string, want ...string) {
		t.Helper()
		out := kubectl(t, append([]string{"apply", "--server-side", "--dry-run=server", "--field-manager=rebalancer-e2e", "--validate=strict"}, args...)...)
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("dry-run output lacks %s:\n%s", w, out)
			}
		}
	}
	rendered := helm(t, "template", "rebalancer", chartDir, "--namespace", "rebalancer-system", "--set", "mode=deployment",
		"--set", "extender.enabled=true", "--set", "webhook.enabled=true", "--set", "webhook.certManager=true",
		"--set", "serviceMonitor.enabled=true", "--set", "dashboard.enabled=true", "--set", "prometheusRule.enabled=true")
	path := filepath.Join(t.TempDir(), "rendered.yaml")
	if err := os.WriteFile(path, []byte(rendered), 0o600); err != nil {
		t.Fatal(err)
	}
	dryRun(t, []string{"-f", path}, "servicemonitor.monitoring.coreos.com/rebalancer-scheduler", "servicemonitor.monitoring.coreos.com/rebalancer",
		"servicemonitor.monitoring.coreos.com/rebalancer-extender", "servicemonitor.monitoring.coreos.com/rebalancer-webhook",
		"prometheusrule.monitoring.coreos.com/rebalancer", "certificate.cert-manager.io/rebalancer-webhook", "issuer.cert-manager.io/rebalancer-webhook",
		"configmap/rebalancer-dashboard")
	dryRun(t, []string{"-k", filepath.Join(repoRoot, "manifests", "monitoring")}, "prometheusrule.monitoring.coreos.com/rebalancer", "configmap/rebalancer-dashboard")
	dryRun(t, []string{"-k", filepath.Join(repoRoot, "manifests", "webhook-cert-manager")}, "certificate.cert-manager.io/rebalancer-webhook")
}
