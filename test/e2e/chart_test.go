//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/yaml"

	"github.com/rebalancer-dev/rebalancer/pkg/extender"
	"github.com/rebalancer-dev/rebalancer/pkg/profile"
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

// chartModes are the chart's values for each combination of kustomize
// variants of manifests/ applied together.
var chartModes = []struct {
	variants []string
	values   []string
}{
	{[]string{"cronjob"}, []string{"dryRun=false", "mode=cronjob"}},
	{[]string{"job"}, []string{"dryRun=false", "mode=job"}},
	{[]string{"deployment"}, []string{"dryRun=false", "mode=deployment"}},
	{[]string{"cronjob", "extender", "webhook", "monitoring"}, []string{"dryRun=false", "extender.enabled=true", "webhook.enabled=true", "dashboard.enabled=true", "prometheusRule.enabled=true"}},
	{[]string{"cronjob", "extender-tls", "webhook-cert-manager"}, []string{"dryRun=false", "extender.enabled=true", "extender.tls.enabled=true", "webhook.enabled=true", "webhook.certManager=true"}},
	{[]string{"deployment", "extender-cert-manager"}, []string{"dryRun=false", "mode=deployment", "extender.enabled=true", "extender.tls.enabled=true", "extender.tls.certManager=true"}},
	{[]string{"cronjob", "estimator"}, []string{"dryRun=false", "estimator.enabled=true", "estimator.clusterName=member1"}},
}

// extenderCADir is where the chart mounts the extender's CA into the
// rebalancer when the extender serves TLS.
const extenderCADir = "/etc/rebalancer-extender"

// wireExtender adds to a kustomize rendering what the chart adds with the
// extender on, the wiring kustomize leaves to the user (docs/schedulers.md,
// "The extender"): the rebalancer also models default-scheduler with the
// extender's snippet, and with TLS mounts the extender's CA.
func wireExtender(t *testing.T, objs map[string]any, tls bool) {
	t.Helper()
	var spec map[string]any
	for _, k := range []string{"CronJob rebalancer-system/rebalancer", "Job rebalancer-system/rebalancer", "Deployment rebalancer-system/rebalancer"} {
		if obj, ok := objs[k].(map[string]any); ok {
			path := []string{"spec", "template", "spec"}
			if strings.HasPrefix(k, "CronJob") {
				path = []string{"spec", "jobTemplate", "spec", "template", "spec"}
			}
			spec, _, _ = unstructured.NestedMap(obj, path...)
			defer func() {
				if err := unstructured.SetNestedMap(obj, spec, path...); err != nil {
					t.Fatal(err)
				}
			}()
		}
	}
	if spec == nil {
		t.Fatal("the kustomize rendering has no rebalancer workload")
	}
	container := spec["containers"].([]any)[0].(map[string]any)
	var args []any
	for _, a := range container["args"].([]any) {
		args = append(args, a)
		if strings.HasPrefix(a.(string), "--scheduler-config=") {
			args = append(args, "--scheduler-config=/etc/rebalancer/default-scheduler-extender.yaml")
		}
	}
	container["args"] = args
	if tls {
		container["volumeMounts"] = append(container["volumeMounts"].([]any),
			map[string]any{"name": "extender-ca", "mountPath": extenderCADir, "readOnly": true})
		spec["volumes"] = append(spec["volumes"].([]any), map[string]any{"name": "extender-ca", "secret": map[string]any{
			"secretName": "rebalancer-extender-tls", "items": []any{map[string]any{"key": "ca.crt", "path": "ca.crt"}}, "optional": true}})
	}
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

// TestChartRendersTheKustomizeTree: for each of chartModes, the chart
// renders the same objects as the kustomize variants together, field by
// field, but for Helm's labels, the pods' checksum annotation, the
// generated ConfigMap's hash suffix, the Namespace, and the rebalancer's
// wiring to the extender (wireExtender). The chart's copies of policies/ and
// the RBAC files are the originals byte for byte.
func TestChartRendersTheKustomizeTree(t *testing.T) {
	for _, c := range []struct{ from, to string }{
		{"manifests/rebalancer/rbac.yaml", "files/rbac/rebalancer.yaml"},
		{"manifests/scheduler/rbac.yaml", "files/rbac/scheduler.yaml"},
		{"manifests/extender/rbac.yaml", "files/rbac/extender.yaml"},
		{"manifests/estimator/rbac.yaml", "files/rbac/estimator.yaml"},
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
		t.Run(strings.Join(m.variants, "+"), func(t *testing.T) {
			var kustomized []*unstructured.Unstructured
			for _, dir := range m.variants {
				kustomized = append(kustomized, decodeAll(t, kubectl(t, "kustomize", filepath.Join(repoRoot, "manifests", dir)))...)
			}
			want := normalize(t, kustomized)
			got := normalize(t, renderChart(t, m.values...))
			extender, tls := slices.Contains(m.values, "extender.enabled=true"), slices.Contains(m.values, "extender.tls.enabled=true")
			if extender {
				wireExtender(t, want, tls)
			}
			if tls {
				// The rebalancer's copy of the extender snippet calls it over
				// HTTPS (TestChartExtenderTLS checks it); the rest is the same.
				for _, objs := range []map[string]any{want, got} {
					data, _, _ := unstructured.NestedMap(objs["ConfigMap rebalancer-system/rebalancer-policies"].(map[string]any), "data")
					if _, ok := data["default-scheduler-extender.yaml"]; !ok {
						t.Fatal("rebalancer-policies lacks default-scheduler-extender.yaml")
					}
					unstructured.RemoveNestedField(objs["ConfigMap rebalancer-system/rebalancer-policies"].(map[string]any), "data", "default-scheduler-extender.yaml")
				}
			}
			compare(t, want, got)
		})
	}
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
// rendering (each mode; the extender, over HTTP and HTTPS, the webhook and
// the other namespace) applies to the real apiserver with server-side
// dry-run and strict validation. Installed elsewhere than
// rebalancer-system, nothing names rebalancer-system any more. Bad values:
// chart_values_test.go.
func TestChartLintAndDryRun(t *testing.T) {
	renders := [][]string{{"mode=cronjob"}, {"mode=job"}, {"mode=deployment", "pair=balancing"},
		{"mode=deployment", "extender.enabled=true", "webhook.enabled=true"},
		{"mode=deployment", "extender.enabled=true", "extender.tls.enabled=true"},
		{"mode=cronjob", "pair=balancing", "estimator.enabled=true", "estimator.clusterName=member1", "estimator.followPolicy=true"}}
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
				if u.GetKind() == "Deployment" && u.GetName() == "rebalancer-estimator" && slices.Contains(set, "estimator.followPolicy=true") {
					// The release's own policy and profile, from the ConfigMap
					// the rebalancer reads them from.
					spec := podSpecOf(t, u)
					c := spec.Containers[0]
					for _, want := range []string{"--policy=/etc/rebalancer/balancing-policy.yaml", "--scheduler-config=/etc/rebalancer/balancing-scheduler.yaml"} {
						if !slices.Contains(c.Command, want) {
							t.Errorf("the estimator's command %v lacks %s", c.Command, want)
						}
					}
					if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/rebalancer" || len(spec.Volumes) != 1 ||
						spec.Volumes[0].ConfigMap == nil || spec.Volumes[0].ConfigMap.Name != "rebalancer-policies" {
						t.Errorf("the estimator does not mount ConfigMap rebalancer-policies at /etc/rebalancer: %+v, %+v", c.VolumeMounts, spec.Volumes)
					}
				}
			}
		})
	}

	t.Run("another namespace", func(t *testing.T) {
		out := helm(t, "template", "rebalancer", chartDir, "--namespace", "ops", "--set", "mode=deployment",
			"--set", "extender.enabled=true", "--set", "extender.tls.enabled=true", "--set", "extender.tls.certManager=true",
			"--set", "webhook.enabled=true", "--set", "webhook.certManager=true", "--set", "serviceMonitor.enabled=true",
			"--set", "dashboard.enabled=true", "--set", "prometheusRule.enabled=true")
		if i := strings.Index(out, "rebalancer-system"); i >= 0 {
			t.Errorf("rendered into ops, the chart still names rebalancer-system: …%s…", out[max(0, i-200):min(len(out), i+100)])
		}
		for _, want := range []string{"--history-configmap=ops/rebalancer-history", "--leader-elect-resource-namespace=ops", "resourceNamespace: ops",
			"https://rebalancer-extender.ops.svc:8888", "- rebalancer-extender.ops.svc.cluster.local", "- rebalancer-webhook.ops.svc", "kind: ServiceMonitor"} {
			if !strings.Contains(out, want) {
				t.Errorf("rendered into ops, the chart lacks %q", want)
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
	objs := renderChart(t, "mode=deployment", "dryRun=false")
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
// webhook's and the extender's Issuers and Certificates) applies with
// server-side dry-run and strict validation against those operators' own
// CRDs: from the chart with everything on, and from manifests/monitoring,
// manifests/webhook-cert-manager and manifests/extender-cert-manager.
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
		"--set", "extender.enabled=true", "--set", "extender.tls.enabled=true", "--set", "extender.tls.certManager=true",
		"--set", "extender.tls.dnsNames={extender.example.com,*.extender.example.com}", "--set", "extender.tls.ipAddresses={10.96.0.20,fd00::20}",
		"--set", "webhook.enabled=true", "--set", "webhook.certManager=true", "--set", "estimator.enabled=true", "--set", "estimator.clusterName=member1",
		"--set", "serviceMonitor.enabled=true", "--set", "dashboard.enabled=true", "--set", "prometheusRule.enabled=true")
	path := filepath.Join(t.TempDir(), "rendered.yaml")
	if err := os.WriteFile(path, []byte(rendered), 0o600); err != nil {
		t.Fatal(err)
	}
	dryRun(t, []string{"-f", path}, "servicemonitor.monitoring.coreos.com/rebalancer-scheduler", "servicemonitor.monitoring.coreos.com/rebalancer",
		"servicemonitor.monitoring.coreos.com/rebalancer-extender", "servicemonitor.monitoring.coreos.com/rebalancer-webhook",
		"servicemonitor.monitoring.coreos.com/rebalancer-estimator",
		"prometheusrule.monitoring.coreos.com/rebalancer", "certificate.cert-manager.io/rebalancer-webhook", "issuer.cert-manager.io/rebalancer-webhook",
		"certificate.cert-manager.io/rebalancer-extender", "certificate.cert-manager.io/rebalancer-extender-ca",
		"issuer.cert-manager.io/rebalancer-extender", "issuer.cert-manager.io/rebalancer-extender-selfsigned",
		"configmap/rebalancer-dashboard")
	dryRun(t, []string{"-k", filepath.Join(repoRoot, "manifests", "monitoring")}, "prometheusrule.monitoring.coreos.com/rebalancer", "configmap/rebalancer-dashboard")
	dryRun(t, []string{"-k", filepath.Join(repoRoot, "manifests", "webhook-cert-manager")}, "certificate.cert-manager.io/rebalancer-webhook")
	dryRun(t, []string{"-k", filepath.Join(repoRoot, "manifests", "extender-cert-manager")}, "deployment.apps/rebalancer-extender", "service/rebalancer-extender",
		"certificate.cert-manager.io/rebalancer-extender", "certificate.cert-manager.io/rebalancer-extender-ca",
		"issuer.cert-manager.io/rebalancer-extender", "issuer.cert-manager.io/rebalancer-extender-selfsigned")
}

// renderKeyed renders the chart and keys its objects by kind and name.
func renderKeyed(t *testing.T, set ...string) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, u := range renderChart(t, set...) {
		out[u.GetKind()+"/"+u.GetName()] = u
	}
	return out
}

// extenderSnippet loads the rebalancer's copy of the extender snippet from
// the rendered ConfigMap with rebalancer's own loader, after replacing
// each key of rewrite with its value (to point it at a test's extender).
func extenderSnippet(t *testing.T, objs map[string]*unstructured.Unstructured, rewrite map[string]string) config.Extender {
	t.Helper()
	text, _, _ := unstructured.NestedString(objs["ConfigMap/rebalancer-policies"].Object, "data", "default-scheduler-extender.yaml")
	for from, to := range rewrite {
		if !strings.Contains(text, from) {
			t.Fatalf("the extender snippet lacks %q:\n%s", from, text)
		}
		text = strings.ReplaceAll(text, from, to)
	}
	path := filepath.Join(t.TempDir(), "default-scheduler-extender.yaml")
	writeFile(t, path, text)
	cfg, err := profile.LoadConfig(path)
	if err != nil {
		t.Fatalf("the chart's extender snippet: %v\n%s", err, text)
	}
	if len(cfg.Extenders) != 1 {
		t.Fatalf("the chart's extender snippet lists %d extenders", len(cfg.Extenders))
	}
	return cfg.Extenders[0]
}

// podOf returns the pod spec of a rendered workload.
func podOf(t *testing.T, objs map[string]*unstructured.Unstructured, key string) v1.PodSpec {
	t.Helper()
	u, ok := objs[key]
	if !ok {
		t.Fatalf("the chart does not render %s", key)
	}
	return podSpecOf(t, u)
}

// TestChartExtenderTLS: the extender's certificate in each mode of the
// chart. Without TLS nothing names a certificate and the rebalancer calls
// http://. With extender.tls.enabled the extender serves Secret
// rebalancer-extender-tls over HTTPS, probes included, and the rebalancer
// calls https:// and verifies against that Secret's ca.crt, which it mounts
// where its snippet says; its snippet is otherwise the shipped one. With
// extender.tls.certManager, cert-manager issues that Secret: a CA
// Certificate from a self-signed Issuer, an Issuer of that CA, and the
// serving Certificate for the Service's names and the extra dnsNames and
// ipAddresses given; the ServiceMonitor scrapes over HTTPS.
func TestChartExtenderTLS(t *testing.T) {
	shipped, err := profile.LoadConfig(filepath.Join(repoRoot, "policies", "default-scheduler-extender.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("http", func(t *testing.T) {
		objs := renderKeyed(t, "extender.enabled=true")
		for k := range objs {
			if strings.HasPrefix(k, "Certificate/") || strings.HasPrefix(k, "Issuer/") {
				t.Errorf("renders %s without extender.tls.certManager", k)
			}
		}
		if ext := extenderSnippet(t, objs, nil); !reflect.DeepEqual(ext, shipped.Extenders[0]) {
			t.Errorf("without TLS the rebalancer's snippet is not the shipped one: %+v", ext)
		}
		if c := podOf(t, objs, "Deployment/rebalancer-extender").Containers[0]; slices.ContainsFunc(c.Command, func(a string) bool { return strings.HasPrefix(a, "--tls") }) {
			t.Errorf("the extender serves TLS without extender.tls.enabled: %q", c.Command)
		}
		if spec := podOf(t, objs, "CronJob/rebalancer"); len(spec.Volumes) != 1 {
			t.Errorf("the rebalancer mounts %d volumes, want its policies only", len(spec.Volumes))
		}
	})

	checkServing := func(t *testing.T, objs map[string]*unstructured.Unstructured) (secret string) {
		t.Helper()
		ext := podOf(t, objs, "Deployment/rebalancer-extender")
		c := ext.Containers[0]
		for _, want := range []string{"--tls-cert-file=/tls/tls.crt", "--tls-private-key-file=/tls/tls.key"} {
			if !slices.Contains(c.Command, want) {
				t.Errorf("the extender's command lacks %s: %q", want, c.Command)
			}
		}
		if len(ext.Volumes) != 1 || ext.Volumes[0].Secret == nil || len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/tls" || c.VolumeMounts[0].Name != ext.Volumes[0].Name {
			t.Fatalf("the extender does not mount its Secret at /tls: %+v %+v", ext.Volumes, c.VolumeMounts)
		}
		for _, p := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe} {
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Scheme != v1.URISchemeHTTPS || p.HTTPGet.Port.StrVal != c.Ports[0].Name {
				t.Errorf("the extender's probe is not over HTTPS on its port: %+v", p)
			}
		}
		port, _, _ := unstructured.NestedSlice(objs["Service/rebalancer-extender"].Object, "spec", "ports")
		if p := port[0].(map[string]any); p["name"] != "https" || p["targetPort"] != c.Ports[0].Name {
			t.Errorf("the extender's Service port: %v, want https to the container's %s", p, c.Ports[0].Name)
		}

		reb := podOf(t, objs, "CronJob/rebalancer")
		var mount string
		for _, m := range reb.Containers[0].VolumeMounts {
			for _, v := range reb.Volumes {
				if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == ext.Volumes[0].Secret.SecretName {
					mount = m.MountPath
					if len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != "ca.crt" {
						t.Errorf("the rebalancer mounts more of the extender's Secret than its ca.crt: %+v", v.Secret.Items)
					}
				}
			}
		}
		if mount == "" {
			t.Fatalf("the rebalancer does not mount the extender's Secret %s", ext.Volumes[0].Secret.SecretName)
		}
		got := extenderSnippet(t, objs, nil)
		if got.URLPrefix != "https://rebalancer-extender.rebalancer-system.svc:8888" || !got.EnableHTTPS || got.TLSConfig == nil || got.TLSConfig.CAFile != mount+"/ca.crt" || got.TLSConfig.Insecure {
			t.Errorf("the rebalancer's snippet: urlPrefix %s, enableHTTPS %v, tlsConfig %+v; want HTTPS verified against %s/ca.crt", got.URLPrefix, got.EnableHTTPS, got.TLSConfig, mount)
		}
		got.URLPrefix, got.EnableHTTPS, got.TLSConfig = shipped.Extenders[0].URLPrefix, false, nil
		if !reflect.DeepEqual(got, shipped.Extenders[0]) {
			t.Errorf("but for TLS, the rebalancer's snippet differs from the shipped one: %+v", got)
		}
		return ext.Volumes[0].Secret.SecretName
	}

	t.Run("tls", func(t *testing.T) {
		objs := renderKeyed(t, "extender.enabled=true", "extender.tls.enabled=true")
		checkServing(t, objs)
		for k := range objs {
			if strings.HasPrefix(k, "Certificate/") || strings.HasPrefix(k, "Issuer/") {
				t.Errorf("renders %s without extender.tls.certManager", k)
			}
		}
	})

	t.Run("cert-manager", func(t *testing.T) {
		objs := renderKeyed(t, "extender.enabled=true", "extender.tls.enabled=true", "extender.tls.certManager=true", "serviceMonitor.enabled=true",
			"extender.tls.dnsNames={extender.example.com,*.extender.example.com}", "extender.tls.ipAddresses={10.96.0.20,fd00::20}")
		secret := checkServing(t, objs)
		field := func(key string, path ...string) any {
			u, ok := objs[key]
			if !ok {
				t.Fatalf("the chart does not render %s", key)
			}
			v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
			return v
		}
		if got := field("Certificate/rebalancer-extender", "spec", "secretName"); got != secret {
			t.Errorf("the serving Certificate writes Secret %v, the extender mounts %s", got, secret)
		}
		wantDNS := []any{"rebalancer-extender.rebalancer-system.svc", "rebalancer-extender.rebalancer-system.svc.cluster.local", "extender.example.com", "*.extender.example.com"}
		if got := field("Certificate/rebalancer-extender", "spec", "dnsNames"); !reflect.DeepEqual(got, wantDNS) {
			t.Errorf("dnsNames %v, want %v", got, wantDNS)
		}
		if got := field("Certificate/rebalancer-extender", "spec", "ipAddresses"); !reflect.DeepEqual(got, []any{"10.96.0.20", "fd00::20"}) {
			t.Errorf("ipAddresses %v, want the two given", got)
		}
		issuer := field("Certificate/rebalancer-extender", "spec", "issuerRef", "name").(string)
		caSecret := field("Issuer/"+issuer, "spec", "ca", "secretName")
		if got := field("Certificate/rebalancer-extender-ca", "spec", "secretName"); got != caSecret || caSecret == nil {
			t.Errorf("Issuer %s signs with Secret %v, the CA Certificate writes %v", issuer, caSecret, got)
		}
		if field("Certificate/rebalancer-extender-ca", "spec", "isCA") != true {
			t.Error("the CA Certificate is not a CA")
		}
		root := field("Certificate/rebalancer-extender-ca", "spec", "issuerRef", "name").(string)
		if field("Issuer/"+root, "spec", "selfSigned") == nil {
			t.Errorf("the CA Certificate's Issuer %s is not self-signed", root)
		}
		endpoints, _, _ := unstructured.NestedSlice(objs["ServiceMonitor/rebalancer-extender"].Object, "spec", "endpoints")
		if len(endpoints) != 1 || endpoints[0].(map[string]any)["scheme"] != "https" {
			t.Errorf("the extender's ServiceMonitor endpoints: %v, want https", endpoints)
		}
	})

	t.Run("webhook cert-manager", func(t *testing.T) {
		objs := renderKeyed(t, "webhook.enabled=true", "webhook.certManager=true")
		mounted := podOf(t, objs, "Deployment/rebalancer-webhook").Volumes[0].Secret.SecretName
		cert := objs["Certificate/rebalancer-webhook"]
		if cert == nil {
			t.Fatal("no Certificate for the webhook")
		}
		secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
		dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		if secret != mounted || !reflect.DeepEqual(dns, []string{"rebalancer-webhook.rebalancer-system.svc", "rebalancer-webhook.rebalancer-system.svc.cluster.local"}) {
			t.Errorf("the webhook's Certificate: Secret %s (mounted: %s), dnsNames %v", secret, mounted, dns)
		}
		inject := objs["MutatingWebhookConfiguration/rebalancer-webhook"].GetAnnotations()["cert-manager.io/inject-ca-from"]
		if inject != "rebalancer-system/"+cert.GetName() {
			t.Errorf("the webhook configuration takes its CA from %q, not the Certificate", inject)
		}
	})
}

// certScript runs hack/webhook-cert.sh with args and the environment added.
func certScript(env []string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(repoRoot, "hack", "webhook-cert.sh"), args...)
	cmd.Env = append(append(os.Environ(), "KUBECTL="+filepath.Join(binDir, "kubectl")+" --kubeconfig="+kubeconfig), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// parseCert decodes the first PEM certificate of data.
func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatal("no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestCertificateScript: hack/webhook-cert.sh signs a certificate whose
// subjectAltNames, as openssl reads them, are the Service's names and the
// names and addresses given by flag and by environment, each once, for
// the webhook and, with --extender, the extender; it refuses malformed ones
// by name before writing anything. The extender serving the script's
// certificate answers the probe rebalancer makes with the chart's HTTPS
// snippet, by IP and by each name given, and not for a name the certificate
// lacks or with another CA. Against the cluster, --extender writes Secret
// rebalancer-extender-tls with tls.crt, tls.key and ca.crt, and a second run
// replaces it.
func TestCertificateScript(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	out, err := certScript([]string{"EXTRA_DNS_NAMES=b.example.com, c.example.com", "EXTRA_IP_ADDRESSES=10.0.0.7"},
		"--extender", "--dns", "extender.example.com", "--dns=extender.example.com", "--ip", "127.0.0.1", "--ip=fd00::20", "--out", dir, "--no-apply")
	if err != nil {
		t.Fatalf("hack/webhook-cert.sh: %v\n%s", err, out)
	}
	ssl, err := exec.Command("openssl", "x509", "-in", filepath.Join(dir, "tls.crt"), "-noout", "-ext", "subjectAltName").CombinedOutput()
	if err != nil {
		t.Fatalf("openssl: %v\n%s", err, ssl)
	}
	_, sans, _ := strings.Cut(string(ssl), "\n")
	want := "DNS:rebalancer-extender.rebalancer-system.svc, DNS:rebalancer-extender.rebalancer-system.svc.cluster.local, DNS:extender.example.com, " +
		"DNS:b.example.com, DNS:c.example.com, IP Address:127.0.0.1, IP Address:FD00:0:0:0:0:0:0:20, IP Address:10.0.0.7"
	if strings.TrimSpace(sans) != want {
		t.Errorf("subjectAltName:\n%s\nwant:\n%s", strings.TrimSpace(sans), want)
	}
	if v, err := exec.Command("openssl", "verify", "-CAfile", filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.crt")).CombinedOutput(); err != nil {
		t.Errorf("openssl verify: %v\n%s", err, v)
	}
	if fi, err := os.Stat(filepath.Join(dir, "tls.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("tls.key: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	webhookDir := filepath.Join(t.TempDir(), "webhook")
	if out, err := certScript(nil, "--dns", "webhook.example.com", "--out", webhookDir, "--no-apply"); err != nil {
		t.Fatalf("hack/webhook-cert.sh: %v\n%s", err, out)
	}
	if got := parseCert(t, mustRead(t, filepath.Join(webhookDir, "tls.crt"))).DNSNames; !reflect.DeepEqual(got, []string{"rebalancer-webhook.rebalancer-system.svc", "rebalancer-webhook.rebalancer-system.svc.cluster.local", "webhook.example.com"}) {
		t.Errorf("the webhook's certificate names %v", got)
	}

	t.Run("refused", func(t *testing.T) {
		for _, c := range []struct {
			env  []string
			args []string
			want string
		}{
			{nil, []string{"--ip", "1.2.3.999"}, `--ip "1.2.3.999": not an IPv4 or IPv6 address`},
			{nil, []string{"--ip=fd00::1::2"}, `"fd00::1::2": not an IPv4 or IPv6 address`},
			{nil, []string{"--dns", "Extender.Example.com"}, `--dns "Extender.Example.com": not a DNS name`},
			{nil, []string{"--dns", "a..example.com"}, `"a..example.com": not a DNS name`},
			{[]string{"EXTRA_IP_ADDRESSES=10.0.0.1,300.1.1.1"}, nil, `"300.1.1.1": not an IPv4 or IPv6 address`},
			{[]string{"EXTRA_DNS_NAMES=ok.example.com bad_name"}, nil, `"bad_name": not a DNS name`},
			{nil, []string{"--dns"}, "--dns: needs a value"},
			{nil, []string{"--ip", "--no-apply"}, "--ip: needs a value"},
			{nil, []string{"--sans", "x"}, "unknown argument --sans"},
			{[]string{"DAYS=0"}, nil, `DAYS "0"`},
			{[]string{"NAMESPACE=Rebalancer"}, nil, `NAMESPACE "Rebalancer"`},
		} {
			out := filepath.Join(t.TempDir(), "out")
			args := append(append([]string{}, c.args...), "--out", out, "--no-apply")
			got, err := certScript(c.env, args...)
			if err == nil || !strings.Contains(got, c.want) {
				t.Errorf("%v %q: %v %s, want a refusal with %q", c.env, c.args, err, got, c.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("%v %q: refused, yet wrote %s", c.env, c.args, out)
			}
		}
		if got, err := certScript(nil, "--no-apply"); err == nil || !strings.Contains(got, "--no-apply: give --out DIR") {
			t.Errorf("--no-apply without --out: %v %s", err, got)
		}
	})

	t.Run("served", func(t *testing.T) {
		e := newTestEnv(t)
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		p := startProcess(t, "rebalancer", "extender", "--bind-address="+addr, "--kubeconfig", kubeconfig,
			"--tls-cert-file", filepath.Join(dir, "tls.crt"), "--tls-private-key-file", filepath.Join(dir, "tls.key"))
		p.waitUp(e, "the extender over HTTPS", func() bool { return answers("https://" + addr + "/readyz") })
		// The chart's snippet, pointed at this extender and the script's CA.
		objs := renderKeyed(t, "extender.enabled=true", "extender.tls.enabled=true")
		snippet := func(ca string) config.Extender {
			return extenderSnippet(t, objs, map[string]string{
				"https://rebalancer-extender.rebalancer-system.svc:8888": "https://" + addr,
				extenderCADir + "/ca.crt":                                ca,
			})
		}
		ctx := context.Background()
		for _, name := range []string{"", "extender.example.com", "c.example.com", "rebalancer-extender.rebalancer-system.svc"} {
			ext := snippet(filepath.Join(dir, "ca.crt"))
			ext.TLSConfig.ServerName = name
			if err := extender.Probe(ctx, ext); err != nil {
				t.Errorf("probe as %q: %v", name, err)
			}
		}
		ext := snippet(filepath.Join(dir, "ca.crt"))
		ext.TLSConfig.ServerName = "elsewhere.example.com"
		if err := extender.Probe(ctx, ext); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("probe as a name the certificate lacks: %v, want a certificate error", err)
		}
		if err := extender.Probe(ctx, snippet(filepath.Join(webhookDir, "ca.crt"))); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("probe trusting another CA: %v, want a certificate error", err)
		}
	})

	t.Run("cluster", func(t *testing.T) {
		ctx := context.Background()
		secrets := client.CoreV1().Secrets("rebalancer-system")
		t.Cleanup(func() { _ = secrets.Delete(ctx, "rebalancer-extender-tls", metav1.DeleteOptions{}) })
		var cas []string
		for range 2 {
			out, err := certScript(nil, "--extender", "--ip", "10.96.0.20")
			if err != nil {
				t.Fatalf("hack/webhook-cert.sh --extender: %v\n%s", err, out)
			}
			s, err := secrets.Get(ctx, "rebalancer-extender-tls", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if s.Type != v1.SecretTypeTLS || len(s.Data["tls.key"]) == 0 || len(s.Annotations[v1.LastAppliedConfigAnnotation]) > 0 {
				t.Errorf("Secret %s: type %s, %d bytes of key, annotations %v; want a TLS Secret without a copy of its key", s.Name, s.Type, len(s.Data["tls.key"]), maps.Keys(s.Annotations))
			}
			roots := x509.NewCertPool()
			if !roots.AppendCertsFromPEM(s.Data["ca.crt"]) {
				t.Fatal("ca.crt holds no certificate")
			}
			cert := parseCert(t, s.Data["tls.crt"])
			for _, name := range []string{"rebalancer-extender.rebalancer-system.svc", "10.96.0.20"} {
				if _, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots}); err != nil {
					t.Errorf("the Secret's certificate does not verify for %s against its ca.crt: %v", name, err)
				}
			}
			if !strings.Contains(out, base64.StdEncoding.EncodeToString(s.Data["ca.crt"])) {
				t.Errorf("the script does not print the CA for kube-scheduler's caData:\n%s", out)
			}
			cas = append(cas, string(s.Data["ca.crt"]))
		}
		if cas[0] == cas[1] {
			t.Error("a second run left the first CA in the Secret")
		}
	})
}
