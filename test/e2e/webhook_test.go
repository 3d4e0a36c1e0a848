//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/internal/testcert"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/webhook"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// startWebhook runs `rebalancer webhook` on loopback with a self-signed
// certificate and installs the shipped MutatingWebhookConfiguration
// (manifests/webhook/webhook.yaml: its name, selectors, failure policy and
// timeout) pointed at it. Both are removed when the test ends.
func startWebhook(t *testing.T, e *testEnv) (p *process, addr string) {
	t.Helper()
	cert, key, ca := testcert.Write(t, t.TempDir())
	addr = "127.0.0.1:" + strconv.Itoa(freePort(t))
	p = startProcess(t, "rebalancer", "webhook", "--bind-address="+addr, "--tls-cert-file="+cert, "--tls-private-key-file="+key, "-v=3")

	data, err := os.ReadFile(filepath.Join(repoRoot, "manifests", "webhook", "webhook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, string(data))
	if len(objs) != 1 {
		t.Fatalf("webhook.yaml holds %d objects", len(objs))
	}
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	fromUnstructured(t, objs[0], &cfg)
	cfg.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + addr + webhook.MutatePath), CABundle: ca}
	if _, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(e.ctx, &cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), cfg.Name, metav1.DeleteOptions{})
	})
	p.waitUp(e, "the webhook to serve", func() bool {
		_, err := webhook.Probe(e.ctx, cfg.Webhooks[0].ClientConfig, cfg.Webhooks[0].TimeoutSeconds)
		return err == nil
	})
	return p, addr
}

// createPod creates a bare pod that names scheduler and returns the
// schedulerName it was stored with.
func createPod(t *testing.T, ctx context.Context, ns, name, scheduler string, labels map[string]string) string {
	t.Helper()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       v1.PodSpec{SchedulerName: scheduler, Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	got, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, name, err)
	}
	return got.Spec.SchedulerName
}

func (e *testEnv) labelNamespace(value string) {
	e.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, wellknown.SchedulerLabel, value)
	if _, err := client.CoreV1().Namespaces().Patch(e.ctx, e.ns, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// TestWebhookOptIn: with the shipped webhook configuration, a pod created
// in a labelled namespace gets rebalancer-scheduler, one in an unlabelled
// namespace keeps default-scheduler, one that names its own scheduler or
// opts out keeps its own. A thin default-scheduler workload of a namespace
// labelled after it was created is planned as rebalancer-scheduler's (the
// webhook gives its replacements that scheduler) and consolidated as one
// that names rebalancer-scheduler itself. With the webhook down, pods are
// still created, and the plan says the webhook cannot be counted on.
func TestWebhookOptIn(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	other := newTestEnv(t) // unlabelled
	wh, _ := startWebhook(t, e)

	// The workload first, while the namespace is not opted in: its pods
	// name default-scheduler, as they would in a cluster that adopts the
	// webhook later.
	nodes := e.nodeNames("wh", 6)
	e.addNodes("8", nodes...)
	e.fragmentedReplicaSetOf("default-scheduler", "web", resources("1", "1Gi"), append(append([]string{}, nodes...), nodes...))
	e.fragmentedReplicaSetOf("default-scheduler", "api", resources("1", "1Gi"), nodes)
	before := append(e.boundPods("web", 12), e.boundPods("api", 6)...)
	for _, p := range before {
		if p.Spec.SchedulerName != "default-scheduler" {
			t.Fatalf("pod %s was created with %q before the namespace was labelled", p.Name, p.Spec.SchedulerName)
		}
	}
	e.labelNamespace(webhook.Enabled)
	// kube-apiserver matches the webhook's namespaceSelector against its
	// own cache of namespaces, which sees the label a moment later.
	e.poll("kube-apiserver to see the namespace opted in", func() (bool, error) {
		probe := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: e.ns},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
		got, err := client.CoreV1().Pods(e.ns).Create(e.ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && got.Spec.SchedulerName == "rebalancer-scheduler", nil
	})

	for _, c := range []struct {
		ns, name, scheduler string
		labels              map[string]string
		want                string
	}{
		{e.ns, "no-scheduler", "", nil, "rebalancer-scheduler"},
		{e.ns, "default", "default-scheduler", nil, "rebalancer-scheduler"},
		{e.ns, "own-scheduler", "gpu-scheduler", nil, "gpu-scheduler"},
		{e.ns, "opted-out", "", map[string]string{wellknown.SchedulerLabel: webhook.Disabled}, "default-scheduler"},
		{other.ns, "unlabelled", "", nil, "default-scheduler"},
	} {
		if got := createPod(t, e.ctx, c.ns, c.name, c.scheduler, c.labels); got != c.want {
			t.Errorf("pod %s/%s (schedulerName %q) was created with %q, want %q", c.ns, c.name, c.scheduler, got, c.want)
		}
	}

	beforeUIDs := uidsOf(before)
	res := runOnce(t, "--policy", e.narrowedPolicy())
	var mine []plan.Move
	for _, m := range res.Plan.Moves {
		if m.Namespace == e.ns {
			mine = append(mine, m)
			if m.Scheduler != "rebalancer-scheduler" || !m.Steered {
				t.Errorf("move of %s: scheduler %q steered %v; want it planned as rebalancer-scheduler's", m.Pod, m.Scheduler, m.Steered)
			}
		}
	}
	noted := false
	for _, w := range res.Plan.Warnings {
		noted = noted || strings.Contains(w, "are planned as rebalancer-scheduler's")
	}
	if len(mine) == 0 || !noted {
		t.Fatalf("planned %d moves here; warnings %q; skipped %v", len(mine), res.Plan.Warnings, res.Plan.Summary.SkippedByReason)
	}
	after := append(e.boundPods("web", 12), e.boundPods("api", 6)...)
	for _, p := range after {
		if !beforeUIDs[string(p.UID)] && p.Spec.SchedulerName != "rebalancer-scheduler" {
			t.Errorf("replacement %s has schedulerName %q", p.Name, p.Spec.SchedulerName)
		}
	}
	onTarget, backOnSource := landed(mine, beforeUIDs, after)
	inUse := func(pods []v1.Pod) int { c, _ := perNode(pods); return len(c) }
	t.Logf("%d moves; %d replacements on their planned target, %d back on a source; nodes in use %d -> %d", len(mine), onTarget, backOnSource, inUse(before), inUse(after))
	if onTarget*100 < 95*len(mine) || backOnSource > 0 {
		t.Errorf("%d of %d replacements landed on their planned target, %d back on a source", onTarget, len(mine), backOnSource)
	}
	if inUse(after) != 3 {
		t.Errorf("nodes in use %d -> %d, want the lower bound, 3", inUse(before), inUse(after))
	}

	// Down: pods are still created, unchanged, and a plan no longer counts
	// on the webhook.
	wh.terminate(t, 20*time.Second)
	start := time.Now()
	if got := createPod(t, e.ctx, e.ns, "webhook-down", "", nil); got != "default-scheduler" {
		t.Errorf("with the webhook down a pod was created with %q", got)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("creating a pod with the webhook down took %s; the webhook's timeout is 2 s", took)
	}
	p, _ := planJSON(t, e.ctx, "--kubeconfig", kubeconfig, "--policy", e.narrowedPolicy())
	said := false
	for _, w := range p.Warnings {
		said = said || strings.Contains(w, "webhook cannot be counted on")
	}
	if !said {
		t.Errorf("the plan does not say the webhook is down: %q", p.Warnings)
	}
}

// TestWebhookManifests: manifests/webhook applies to the real apiserver
// (server-side dry-run, strict validation), hardened like the others, with
// no API access at all; hack/webhook-cert.sh writes a serving certificate
// for the webhook Service into its Secret and the CA into the configuration.
func TestWebhookManifests(t *testing.T) {
	objs := dryRunManifests(t, "webhook", "deployment.apps/rebalancer-webhook", "service/rebalancer-webhook",
		"mutatingwebhookconfiguration.admissionregistration.k8s.io/rebalancer-webhook", "poddisruptionbudget.policy/rebalancer-webhook")
	for _, u := range objs {
		switch u.GetKind() {
		case "Deployment":
			spec := podSpecOf(t, u)
			checkPodSpec(t, "Deployment/"+u.GetName(), spec)
			if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
				t.Errorf("the webhook mounts a ServiceAccount token it does not use")
			}
		case "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
			t.Errorf("%s/%s: the webhook needs no API access", u.GetKind(), u.GetName())
		}
	}

	// The self-signed path, against the real configuration object.
	ctx := context.Background()
	kubectl(t, "apply", "--server-side", "--field-manager=rebalancer-e2e", "-f", filepath.Join(repoRoot, "manifests", "webhook", "webhook.yaml"))
	t.Cleanup(func() {
		_ = client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, webhook.DefaultConfiguration, metav1.DeleteOptions{})
		_ = client.CoreV1().Secrets("rebalancer-system").Delete(ctx, "rebalancer-webhook-tls", metav1.DeleteOptions{})
	})
	script := exec.Command(filepath.Join(repoRoot, "hack", "webhook-cert.sh"))
	script.Env = append(os.Environ(), "KUBECTL="+filepath.Join(binDir, "kubectl")+" --kubeconfig="+kubeconfig)
	if out, err := script.CombinedOutput(); err != nil {
		t.Fatalf("hack/webhook-cert.sh: %v\n%s", err, out)
	}
	secret, err := client.CoreV1().Secrets("rebalancer-system").Get(ctx, "rebalancer-webhook-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, webhook.DefaultConfiguration, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(cfg.Webhooks[0].ClientConfig.CABundle) {
		t.Fatal("caBundle holds no certificate")
	}
	block, _ := pem.Decode(secret.Data["tls.crt"])
	if block == nil {
		t.Fatal("tls.crt holds no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "rebalancer-webhook.rebalancer-system.svc", Roots: roots}); err != nil {
		t.Errorf("the Secret's certificate does not verify against the caBundle for the Service's name: %v", err)
	}
}
