//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// helmTemplate renders the chart with args added and returns its output and
// error, for renderings that are meant to fail.
func helmTemplate(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(binDir, "helm"), append([]string{"template", "rebalancer", chartDir, "--namespace", "rebalancer-system"}, args...)...)
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// namesValue says whether a refusal names the value at path (dotted, as
// --set writes it): the schema's JSON pointer, the parent's pointer with
// the unknown or missing key, or the dotted path of a template's message.
func namesValue(out, path string) bool {
	pointer := "/" + strings.ReplaceAll(path, ".", "/")
	i := strings.LastIndex(pointer, "/")
	parent, key := pointer[:i], pointer[i+1:]
	return strings.Contains(out, "at '"+pointer+"'") ||
		(strings.Contains(out, "at '"+parent+"'") && strings.Contains(out, "'"+key+"'")) ||
		strings.Contains(out, "execution error") && strings.Contains(out, path)
}

// TestChartValuesSchema: values.schema.json describes every value of
// values.yaml and nothing else: each key of values.yaml has its schema,
// every object of the schema refuses keys it does not list and requires
// those values.yaml has, and the defaults pass it.
func TestChartValuesSchema(t *testing.T) {
	var values map[string]any
	if err := yaml.Unmarshal(mustRead(t, filepath.Join(repoRoot, chartDir, "values.yaml")), &values); err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(mustRead(t, filepath.Join(repoRoot, chartDir, "values.schema.json")), &schema); err != nil {
		t.Fatal(err)
	}
	defs, _ := schema["$defs"].(map[string]any)
	resolve := func(s map[string]any) map[string]any {
		if ref, ok := s["$ref"].(string); ok {
			target, _ := defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
			if target == nil {
				t.Fatalf("schema: $ref %s resolves to nothing", ref)
			}
			return target
		}
		return s
	}
	covered := 0
	var walk func(path string, value any, s map[string]any)
	walk = func(path string, value any, s map[string]any) {
		s = resolve(s)
		obj, isObj := value.(map[string]any)
		props, _ := s["properties"].(map[string]any)
		if !isObj || props == nil {
			covered++ // a leaf, or a map of user keys (labels, resources) its schema types
			if len(s) == 0 {
				t.Errorf("schema: %s has an empty schema", path)
			}
			return
		}
		if s["additionalProperties"] != false {
			t.Errorf("schema: %s takes keys it does not list (additionalProperties is not false): a misspelt value would be ignored", path)
		}
		required := map[string]bool{}
		req, _ := s["required"].([]any)
		for _, r := range req {
			required[r.(string)] = true
		}
		for k, v := range obj {
			p := strings.TrimPrefix(path+"."+k, ".")
			sub, ok := props[k].(map[string]any)
			if !ok {
				t.Errorf("schema: no schema for %s", p)
				continue
			}
			// resources is a container's ResourceRequirements, whose
			// requests and limits are each optional, as in a pod.
			if !required[k] && !strings.HasSuffix(path, ".resources") {
				t.Errorf("schema: %s is not required: --set %s=null would render without it", p, p)
			}
			walk(p, v, sub)
		}
		for k := range props {
			if _, ok := obj[k]; !ok && (path != "" || k != "global") {
				t.Errorf("schema: %s has a schema but no default in values.yaml", strings.TrimPrefix(path+"."+k, "."))
			}
		}
	}
	walk("", values, schema)
	if covered < 50 {
		t.Errorf("the schema covers %d values; values.yaml has more", covered)
	}
	if out, err := helmTemplate(); err != nil {
		t.Fatalf("the defaults: %v\n%s", err, out)
	}
}

// badValues are values helm template must refuse, each with the value its
// message names and the reason it must give. Schema refusals name a JSON
// pointer (at '/rebalancer/replicas'), the templates' the dotted path.
var badValues = []struct {
	set    []string // --set, or --set-string when prefixed with "string:"
	path   string
	reason string
}{
	// Counts and ranges.
	{[]string{"rebalancer.replicas=-1"}, "rebalancer.replicas", "minimum: got -1, want 1"},
	{[]string{"rebalancer.replicas=0"}, "rebalancer.replicas", "minimum: got 0, want 1"},
	{[]string{"rebalancer.replicas=1.5"}, "rebalancer.replicas", "want integer"},
	{[]string{"rebalancer.replicas=two"}, "rebalancer.replicas", "want integer"},
	{[]string{"scheduler.replicas=0"}, "scheduler.replicas", "minimum"},
	{[]string{"extender.replicas=-3"}, "extender.replicas", "minimum"},
	{[]string{"webhook.replicas=0"}, "webhook.replicas", "minimum"},
	{[]string{"webhook.timeoutSeconds=60"}, "webhook.timeoutSeconds", "maximum: got 60, want 30"},
	{[]string{"webhook.timeoutSeconds=0"}, "webhook.timeoutSeconds", "minimum: got 0, want 1"},
	{[]string{"webhook.timeoutSeconds=2s"}, "webhook.timeoutSeconds", "want integer"},
	// Percentages and counts of pods.
	{[]string{"rebalancer.maxPerWorkload=150%"}, "rebalancer.maxPerWorkload", "does not match pattern"},
	{[]string{"rebalancer.maxPerWorkload=0%"}, "rebalancer.maxPerWorkload", "does not match pattern"},
	{[]string{"rebalancer.maxPerWorkload=-1"}, "rebalancer.maxPerWorkload", "minimum"},
	{[]string{"rebalancer.maxPerWorkload=half"}, "rebalancer.maxPerWorkload", "does not match pattern"},
	{[]string{"rebalancer.maxPerWorkload=2.5"}, "rebalancer.maxPerWorkload", "does not match pattern"},
	{[]string{"rebalancer.podDisruptionBudget.minAvailable=101%"}, "rebalancer.podDisruptionBudget.minAvailable", "does not match pattern"},
	{[]string{"scheduler.podDisruptionBudget.minAvailable=-1"}, "scheduler.podDisruptionBudget.minAvailable", "minimum"},
	{[]string{"string:webhook.podDisruptionBudget.minAvailable=1"}, "webhook.podDisruptionBudget.minAvailable", "does not match pattern"},
	// Durations and schedules.
	{[]string{"rebalancer.interval=abc"}, "rebalancer.interval", "does not match pattern"},
	{[]string{"rebalancer.interval=10"}, "rebalancer.interval", "want string"},
	{[]string{"rebalancer.interval=-5m"}, "rebalancer.interval", "does not match pattern"},
	{[]string{"rebalancer.interval=10mh"}, "rebalancer.interval", "does not match pattern"},
	{[]string{"rebalancer.interval=1d"}, "rebalancer.interval", "does not match pattern"},
	{[]string{"rebalancer.interval="}, "rebalancer.interval", "does not match pattern"},
	{[]string{"rebalancer.interval=0s"}, "rebalancer.interval", "must be above zero"},
	{[]string{"rebalancer.interval=0h0.0m"}, "rebalancer.interval", "must be above zero"},
	{[]string{"rebalancer.schedule=* * *"}, "rebalancer.schedule", "does not match pattern"},
	{[]string{"rebalancer.schedule=0 0 3 * * *"}, "rebalancer.schedule", "does not match pattern"},
	{[]string{"rebalancer.schedule=CRON_TZ=UTC 0 3 * * *"}, "rebalancer.schedule", "does not match pattern"},
	{[]string{"rebalancer.schedule=@fortnightly"}, "rebalancer.schedule", "does not match pattern"},
	{[]string{"rebalancer.schedule=5"}, "rebalancer.schedule", "want string"},
	{[]string{"serviceMonitor.interval=30"}, "serviceMonitor.interval", "want string"},
	{[]string{"serviceMonitor.interval=30x"}, "serviceMonitor.interval", "does not match pattern"},
	{[]string{"serviceMonitor.interval="}, "serviceMonitor.interval", "minLength"},
	// Enums and flags.
	{[]string{"mode=daemon"}, "mode", "value must be one of"},
	{[]string{"pair=spreading"}, "pair", "value must be one of"},
	{[]string{"image.pullPolicy=Sometimes"}, "image.pullPolicy", "value must be one of"},
	{[]string{"dashboard.enabled=yes"}, "dashboard.enabled", "want boolean"},
	{[]string{"extender.tls.enabled=1"}, "extender.tls.enabled", "want boolean"},
	{[]string{"extender.followRollouts=yes"}, "extender.followRollouts", "want boolean"},
	{[]string{"webhook.certManager=on"}, "webhook.certManager", "want boolean"},
	// Names, images, addresses, quantities, labels.
	{[]string{"image.repository="}, "image.repository", "does not match pattern"},
	{[]string{"image.repository=Registry.example/Rebalancer"}, "image.repository", "does not match pattern"},
	{[]string{"image.tag=:latest"}, "image.tag", "does not match pattern"},
	{[]string{"image.tag=v1 beta"}, "image.tag", "does not match pattern"},
	{[]string{"rebalancer.priorityClassName=Critical_Pods"}, "rebalancer.priorityClassName", "does not match pattern"},
	{[]string{"scheduler.priorityClassName=-critical"}, "scheduler.priorityClassName", "does not match pattern"},
	{[]string{"rebalancer.prometheusTokenSecret.namespace=Monitoring", "rebalancer.prometheusTokenSecret.name=token"}, "rebalancer.prometheusTokenSecret.namespace", "does not match pattern"},
	{[]string{"rebalancer.prometheusTokenSecret.namespace=monitoring", "rebalancer.prometheusTokenSecret.name=a_token"}, "rebalancer.prometheusTokenSecret.name", "does not match pattern"},
	{[]string{"rebalancer.resources.requests.cpu=lots"}, "rebalancer.resources.requests.cpu", "does not match pattern"},
	{[]string{"scheduler.resources.limits.memory=-1Gi"}, "scheduler.resources.limits.memory", "does not match pattern"},
	{[]string{"extender.resources.requests.cpu=-1"}, "extender.resources.requests.cpu", "minimum"},
	{[]string{"webhook.resources.limits.memory=1GB"}, "webhook.resources.limits.memory", "does not match pattern"},
	{[]string{"serviceMonitor.labels.release=true"}, "serviceMonitor.labels.release", "want string"},
	{[]string{"serviceMonitor.labels.release=prom etheus"}, "serviceMonitor.labels.release", "does not match pattern"},
	{[]string{"rebalancer.extraArgs={cooldown=1h}"}, "rebalancer.extraArgs.0", "does not match pattern"},
	{[]string{"extender.enabled=true", "extender.tls.enabled=true", "extender.tls.certManager=true", "extender.tls.ipAddresses={1.2.3.999}"}, "extender.tls.ipAddresses.0", "does not match pattern"},
	{[]string{"extender.enabled=true", "extender.tls.enabled=true", "extender.tls.certManager=true", "extender.tls.ipAddresses={fd00::1::2}"}, "extender.tls.ipAddresses.0", "does not match pattern"},
	{[]string{"extender.enabled=true", "extender.tls.enabled=true", "extender.tls.certManager=true", "extender.tls.dnsNames={Extender.Example.com}"}, "extender.tls.dnsNames.0", "does not match pattern"},
	{[]string{"extender.tls.dnsNames={a.example.com,a.example.com}"}, "extender.tls.dnsNames", "items at 0 and 1 are equal"},
	{[]string{"estimator.enabled=true", "estimator.clusterName=Member_1"}, "estimator.clusterName", "does not match pattern"},
	{[]string{"policy=42"}, "policy", "want string"},
	// Unknown and missing values.
	{[]string{"rebalancer.replica=3"}, "rebalancer.replica", "additional properties"},
	{[]string{"replicas=3"}, "replicas", "additional properties"},
	{[]string{"extender.tls.ipAddress={10.0.0.1}"}, "extender.tls.ipAddress", "additional properties"},
	{[]string{"webhook.resources.requesting.cpu=1"}, "webhook.resources.requesting", "additional properties"},
	{[]string{"rebalancer.podDisruptionBudget=null"}, "rebalancer.podDisruptionBudget", "missing property"},
	{[]string{"image.tag=null"}, "image.tag", "missing property"},
	// Rules that tie values together (templates/_helpers.tpl).
	{[]string{"mode=deployment", "rebalancer.podDisruptionBudget.minAvailable=2"}, "rebalancer.podDisruptionBudget.minAvailable", "no pod could ever be evicted"},
	{[]string{"mode=deployment", "rebalancer.replicas=3", "rebalancer.podDisruptionBudget.minAvailable=67%"}, "rebalancer.podDisruptionBudget.minAvailable", "no pod could ever be evicted"},
	{[]string{"scheduler.replicas=1"}, "scheduler.podDisruptionBudget.minAvailable", "no pod could ever be evicted"},
	{[]string{"extender.enabled=true", "extender.podDisruptionBudget.minAvailable=100%"}, "extender.podDisruptionBudget.minAvailable", "no pod could ever be evicted"},
	{[]string{"webhook.enabled=true", "webhook.replicas=3", "webhook.podDisruptionBudget.minAvailable=5"}, "webhook.podDisruptionBudget.minAvailable", "no pod could ever be evicted"},
	{[]string{"estimator.enabled=true"}, "estimator.clusterName", "this member cluster's name in Karmada"},
	{[]string{"rebalancer.prometheusTokenSecret.name=token"}, "rebalancer.prometheusTokenSecret", "give both namespace and name"},
	{[]string{"rebalancer.extraArgs={--max-per-workload=3}"}, "rebalancer.extraArgs", "--max-per-workload is set by rebalancer.maxPerWorkload"},
	{[]string{"rebalancer.extraArgs={--cooldown=1h,--once}"}, "rebalancer.extraArgs", "--once is set by mode"},
	{[]string{"mode=deployment", "rebalancer.extraArgs={--interval=1m}"}, "rebalancer.extraArgs", "--interval is set by rebalancer.interval"},
	{[]string{"rebalancer.extraArgs={--policy=/tmp/p.yaml}"}, "rebalancer.extraArgs", "--policy is set by policy"},
	{[]string{"extender.enabled=true", "extender.tls.certManager=true"}, "extender.tls.certManager", "set extender.tls.enabled=true too"},
	{[]string{"extender.enabled=true", "extender.tls.enabled=true", "extender.tls.dnsNames={extender.example.com}"}, "extender.tls.dnsNames", "only cert-manager's certificate takes them"},
	{[]string{"extender.enabled=true", "extender.tls.enabled=true", "extender.tls.ipAddresses={10.0.0.1}"}, "extender.tls.ipAddresses", "only cert-manager's certificate takes them"},
	{[]string{"policy=kind: KubeSchedulerConfiguration"}, "policy", `kind "KubeSchedulerConfiguration": want a DeschedulerPolicy`},
	{[]string{"policy=profiles: [unclosed"}, "policy", "not YAML"},
	{[]string{"schedulerConfig=kind: DeschedulerPolicy"}, "schedulerConfig", "want a KubeSchedulerConfiguration"},
	{[]string{"schedulerConfig=kind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: my-scheduler"}, "schedulerConfig", "no profile with schedulerName rebalancer-scheduler"},
	{[]string{"schedulerConfig=kind: KubeSchedulerConfiguration\nclientConnection:\n  kubeconfig: /etc/kubernetes/scheduler.conf\nprofiles:\n- schedulerName: rebalancer-scheduler"}, "schedulerConfig", "clientConnection.kubeconfig is set"},
}

// setArgs turns values into helm flags: "string:" ones into --set-string,
// YAML text (a newline or ": ") into --set-json strings, which helm does
// not split at commas, the others into --set.
func setArgs(set []string) []string {
	var args []string
	for _, s := range set {
		switch {
		case strings.HasPrefix(s, "string:"):
			args = append(args, "--set-string", strings.TrimPrefix(s, "string:"))
		case strings.ContainsAny(s, "\n") || strings.Contains(s, ": "):
			k, v, _ := strings.Cut(s, "=")
			quoted, _ := json.Marshal(v)
			args = append(args, "--set-json", k+"="+string(quoted))
		default:
			args = append(args, "--set", s)
		}
	}
	return args
}

// TestChartRefusesBadValues: each of badValues fails helm template with a
// message naming the value and giving the reason, and renders nothing.
func TestChartRefusesBadValues(t *testing.T) {
	for _, c := range badValues {
		t.Run(strings.Join(c.set, ","), func(t *testing.T) {
			out, err := helmTemplate(setArgs(c.set)...)
			if err == nil {
				t.Fatalf("rendered, want a refusal naming %s", c.path)
			}
			if !namesValue(out, c.path) {
				t.Errorf("the refusal does not name %s:\n%s", c.path, out)
			}
			if !strings.Contains(out, c.reason) {
				t.Errorf("the refusal does not say %q:\n%s", c.reason, out)
			}
			if strings.Contains(out, "apiVersion:") {
				t.Errorf("refused, yet rendered objects:\n%s", out)
			}
		})
	}

	// The templates check mode and pair too, for renderings that skip the
	// schema.
	for set, want := range map[string]string{"mode=daemon": `mode "daemon": want cronjob, job or deployment`, "pair=spreading": `pair "spreading": want binpacking, balancing or load-aware`} {
		out, err := helmTemplate("--skip-schema-validation", "--set", set)
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("--skip-schema-validation --set %s: %v %s, want an error with %q", set, err, out, want)
		}
	}
}

// TestChartAcceptsEdgeValues: values at the edge of what the schema and the
// templates allow render, and apply to the API server with server-side
// dry-run: the checks refuse nothing the cluster takes. An empty image tag
// is the chart's appVersion.
func TestChartAcceptsEdgeValues(t *testing.T) {
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(mustRead(t, filepath.Join(repoRoot, chartDir, "Chart.yaml")), &chart); err != nil || chart.AppVersion == "" {
		t.Fatalf("Chart.yaml: appVersion %q, %v", chart.AppVersion, err)
	}
	digest := "@sha256:" + strings.Repeat("ab", 32)
	renders := []struct {
		set   []string
		image string // the image every container then runs
	}{
		{[]string{"image.tag=", "rebalancer.maxPerWorkload=0", "rebalancer.schedule=@every 2h", "webhook.enabled=true", "webhook.timeoutSeconds=30"}, "rebalancer:" + chart.AppVersion},
		{[]string{"rebalancer.maxPerWorkload=100%", "rebalancer.schedule=0 3 * * MON-FRI", "webhook.enabled=true", "webhook.timeoutSeconds=1"}, "rebalancer:v0.1.0"},
		{[]string{"image.repository=registry.example:5000/team/rebalancer", "image.tag=v0.2.0" + digest, "rebalancer.maxPerWorkload=1%", "rebalancer.schedule=@hourly"}, "registry.example:5000/team/rebalancer:v0.2.0" + digest},
		{[]string{"mode=deployment", "rebalancer.interval=1h30m", "rebalancer.replicas=3", "rebalancer.podDisruptionBudget.minAvailable=66%", "rebalancer.maxPerWorkload=7",
			"scheduler.replicas=1", "scheduler.podDisruptionBudget.minAvailable=0", "rebalancer.resources.requests.cpu=0.5", "rebalancer.resources.limits.memory=4e9",
			"rebalancer.extraArgs={--cooldown=1h,-v=2}", "serviceMonitor.labels.release=prometheus", "serviceMonitor.interval=1m30s"}, "rebalancer:v0.1.0"},
		{[]string{"mode=deployment", "rebalancer.interval=1.5h", "rebalancer.replicas=1", "rebalancer.podDisruptionBudget.enabled=false", "scheduler.enabled=false",
			"extender.enabled=true", "extender.tls.enabled=true", "extender.replicas=1", "extender.podDisruptionBudget.minAvailable=0%", "extender.followRollouts=true"}, "rebalancer:v0.1.0"},
	}
	for _, r := range renders {
		t.Run(strings.Join(r.set, ","), func(t *testing.T) {
			out, err := helmTemplate(setArgs(r.set)...)
			if err != nil {
				t.Fatalf("refused: %v\n%s", err, out)
			}
			images := 0
			follow := slices.Contains(r.set, "extender.followRollouts=true")
			for _, u := range decodeAll(t, out) {
				switch u.GetKind() {
				case "Deployment", "Job", "CronJob":
					for _, c := range podSpecOf(t, u).Containers {
						images++
						if c.Image != r.image {
							t.Errorf("%s/%s runs %q, want %q", u.GetKind(), u.GetName(), c.Image, r.image)
						}
						if c.Name == "extender" && slices.Contains(c.Command, "--follow-rollouts") != follow {
							t.Errorf("the extender runs %q; want --follow-rollouts %v", c.Command, follow)
						}
					}
				}
			}
			if images == 0 {
				t.Error("no container rendered")
			}
			// Not under t.TempDir(): the test's name has commas, which
			// kubectl's -f splits at.
			f, err := os.CreateTemp("", "rendered-*.yaml")
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			path := f.Name()
			t.Cleanup(func() { os.Remove(path) })
			writeFile(t, path, out)
			kubectl(t, "apply", "--server-side", "--dry-run=server", "--field-manager=rebalancer-e2e", "--validate=strict", "-f", path)
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
