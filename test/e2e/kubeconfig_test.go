//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// taintedWorkload is a cluster the bin-packing plan changes: four pods of
// one Deployment on a node tainted for maintenance, room elsewhere. It
// returns the pods.
func taintedWorkload(e *testEnv) []v1.Pod {
	e.t.Helper()
	e.addNodes("8", e.nodeNames("kc", 3)...)
	e.addDeployment("web", 4, resources("1", "1Gi"))
	pods := e.boundPods("web", 4)
	if counts, summary := perNode(pods); len(counts) != 1 {
		e.t.Fatalf("the bin-packing profile spread 4 small pods: %s", summary)
	}
	e.taintForMaintenance(pods[0].Spec.NodeName)
	return pods
}

// rebalancerIn runs the rebalancer binary with the shipped bin-packing pair
// in an environment holding only what env sets of the cluster's whereabouts
// (no KUBECONFIG, an empty home, not in a pod, unless env says otherwise).
// prefix runs before the binary (a wrapper such as unshare).
func rebalancerIn(t *testing.T, env []string, prefix []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args = append(args, "--policy", filepath.Join(repoRoot, "policies", "binpacking-policy.yaml"),
		"--scheduler-config", filepath.Join(repoRoot, "policies", "binpacking-scheduler.yaml"))
	argv := append(append(prefix, filepath.Join(binDir, "rebalancer")), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	cmd.Env = append(cmd.Env, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// movesIn counts a JSON plan's moves of namespace ns.
func movesIn(t *testing.T, out, ns string) int {
	t.Helper()
	var p plan.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan output is not JSON: %v\n%s", err, out)
	}
	n := 0
	for _, m := range p.Moves {
		if m.Namespace == ns {
			n++
		}
	}
	return n
}

// TestKubeconfigAsKubectlReadsIt: with no --kubeconfig, plan and run
// --dry-run find the cluster as kubectl does, in the files of KUBECONFIG
// merged (the first file's current context, a context of the second), and
// --context picks another context of the merge.
func TestKubeconfigAsKubectlReadsIt(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	taintedWorkload(e)

	admin, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	adminCtx := admin.Contexts[admin.CurrentContext]
	dir := t.TempDir()
	// first: the current context and the credentials; second: the clusters
	// and contexts, its own current context a dead server. Neither works
	// alone.
	first := clientcmdapi.NewConfig()
	first.CurrentContext = "e2e"
	first.AuthInfos["admin"] = admin.AuthInfos[adminCtx.AuthInfo]
	second := clientcmdapi.NewConfig()
	second.Clusters["local"] = admin.Clusters[adminCtx.Cluster]
	second.Clusters["dead"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	second.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "admin"}
	second.Contexts["other"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "admin"}
	second.Contexts["dead"] = &clientcmdapi.Context{Cluster: "dead", AuthInfo: "admin"}
	second.CurrentContext = "dead"
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for path, cfg := range map[string]*clientcmdapi.Config{a: first, b: second} {
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"KUBECONFIG=" + a + string(os.PathListSeparator) + b}

	for _, args := range [][]string{
		{"plan", "-o", "json"},
		{"plan", "-o", "json", "--context", "other"},
		{"run", "--once", "--dry-run", "-o", "json"},
	} {
		out, stderr, err := rebalancerIn(t, env, nil, args...)
		if err != nil {
			t.Fatalf("KUBECONFIG=a:b rebalancer %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
		if args[0] == "run" {
			var cycle struct{ Plan json.RawMessage }
			if err := json.Unmarshal([]byte(out), &cycle); err != nil {
				t.Fatalf("run --dry-run output: %v\n%s", err, out)
			}
			out = string(cycle.Plan)
		}
		if n := movesIn(t, out, e.ns); n != 4 {
			t.Errorf("KUBECONFIG=a:b rebalancer %s: %d moves off the tainted node, want 4", strings.Join(args, " "), n)
		}
	}
	if _, stderr, err := rebalancerIn(t, env, nil, "plan", "--context", "dead"); err == nil || !strings.Contains(stderr, "127.0.0.1:1") {
		t.Errorf("--context dead: %v, want the dead server named\n%s", err, stderr)
	}
	if _, stderr, err := rebalancerIn(t, nil, nil, "plan"); err == nil || !strings.Contains(stderr, "no cluster to connect to") {
		t.Errorf("plan with no cluster anywhere: %v, want what it tried\n%s", err, stderr)
	}
}

// TestInClusterConfig: in a pod (KUBERNETES_SERVICE_HOST and the service
// account's token and CA at their fixed paths, in a mount namespace of the
// test's own), plan connects as the pod's service account, with no
// kubeconfig anywhere.
func TestInClusterConfig(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	taintedWorkload(e)
	kubectl(t, "apply", "--server-side", "--field-manager=rebalancer-e2e", "-f", filepath.Join(repoRoot, "manifests", "rebalancer", "rbac.yaml"))
	token := e.token("rebalancer-system", "rebalancer")
	admin, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cluster := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	ca := cluster.CertificateAuthorityData
	if len(ca) == 0 {
		if ca, err = os.ReadFile(cluster.CertificateAuthority); err != nil {
			t.Fatal(err)
		}
	}
	server, err := url.Parse(cluster.Server)
	if err != nil {
		t.Fatal(err)
	}
	secrets := t.TempDir()
	for name, data := range map[string][]byte{"token": []byte(token), "ca.crt": ca} {
		if err := os.WriteFile(filepath.Join(secrets, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The paths client-go reads are fixed: a private /run (where /var/run
	// points) holds them for the rebalancer alone.
	const saDir = "/run/secrets/kubernetes.io/serviceaccount"
	wrap := []string{"unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
		`mount -t tmpfs tmpfs /run && mkdir -p ` + saDir + ` && cp "$0/token" "$0/ca.crt" ` + saDir + ` && exec "$@"`, secrets}
	env := []string{"KUBERNETES_SERVICE_HOST=" + server.Hostname(), "KUBERNETES_SERVICE_PORT=" + server.Port()}
	started := time.Now()
	out, stderr, err := rebalancerIn(t, env, wrap, "plan", "-o", "json", "-v=1")
	if err != nil {
		t.Fatalf("rebalancer plan in a pod's environment: %v\n%s", err, stderr)
	}
	if n := movesIn(t, out, e.ns); n != 4 {
		t.Errorf("plan with the in-cluster config: %d moves off the tainted node, want 4", n)
	}
	if !strings.Contains(stderr, "in-cluster config") {
		t.Errorf("plan -v=1 does not say it used the in-cluster config:\n%s", stderr)
	}
	// The API server saw the service account, not the admin.
	auditedVerbs(t, "system:serviceaccount:rebalancer-system:rebalancer", started)
}

// TestReadOnlyUserPlans: a user who may read the cluster but not the move
// history's ConfigMap gets a plan with a warning that cooldowns are not
// known; run, which must record its moves, stops before evicting anything.
func TestReadOnlyUserPlans(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	pods := taintedWorkload(e)
	kubectl(t, "apply", "--server-side", "--field-manager=rebalancer-e2e", "-f", filepath.Join(repoRoot, "manifests", "rebalancer", "rbac.yaml"))
	// The rebalancer's cluster-wide rights, without its Role in
	// rebalancer-system (the history ConfigMap, the Lease).
	if _, err := client.CoreV1().ServiceAccounts(e.ns).Create(e.ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-reader-" + e.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "rebalancer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "reader", Namespace: e.ns}},
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(e.ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	env := []string{"KUBECONFIG=" + serviceAccountKubeconfig(t, e.token(e.ns, "reader"))}

	for _, args := range [][]string{{"plan", "-o", "json"}, {"run", "--once", "--dry-run", "-o", "yaml"}} {
		out, stderr, err := rebalancerIn(t, env, nil, args...)
		if err != nil {
			t.Fatalf("rebalancer %s as a reader: %v\n%s", strings.Join(args, " "), err, stderr)
		}
		if !strings.Contains(stderr, "cooldowns are not known") {
			t.Errorf("rebalancer %s as a reader: no warning that cooldowns are not known:\n%s", strings.Join(args, " "), stderr)
		}
		if args[0] == "plan" && movesIn(t, out, e.ns) != 4 {
			t.Errorf("plan as a reader: want the 4 moves off the tainted node:\n%s", out)
		}
	}

	_, stderr, err := rebalancerIn(t, env, nil, "run", "--once")
	if err == nil || !strings.Contains(stderr, "refusing to plan without the move history") {
		t.Errorf("run --once as a reader: %v, want it refused for the history\n%s", err, stderr)
	}
	now, err := client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := uidsOf(pods)
	for _, p := range now.Items {
		if !before[string(p.UID)] {
			t.Errorf("pod %s is new: run as a reader evicted", p.Name)
		}
	}
}
