//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// TestRebalancerRBACIsEnough: `rebalancer run --once` as the ServiceAccount
// of manifests/rebalancer, with exactly the permissions shipped there, plans
// and evicts without a single forbidden request; and every request it made,
// as the audit log shows, is one a shipped rule grants.
func TestRebalancerRBACIsEnough(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	saConfig := e.asServiceAccount(filepath.Join(repoRoot, "manifests", "rebalancer", "rbac.yaml"), "rebalancer")

	// A node under maintenance (its pods move) and thin nodes (Consolidation
	// drains one, patching its taints).
	nodes := e.nodeNames("rbac", 4)
	e.addNodes("8", nodes...)
	e.fragmentedReplicaSet("web", resources("1", "1Gi"), nodes)
	e.taintForMaintenance(nodes[0])

	started := time.Now()
	res := runOnce(t, "--kubeconfig", saConfig)
	evicted, drains := 0, 0
	for _, m := range res.Result.Evicted {
		if m.Namespace == e.ns {
			evicted++
			if m.Drain {
				drains++
			}
		}
	}
	if evicted == 0 || drains == 0 || res.Result.Errors != 0 {
		t.Fatalf("as the ServiceAccount: evicted %d here (%d drains), %d API errors; result %+v", evicted, drains, res.Result.Errors, res.Result)
	}

	// The long-lived mode takes its Lease (named as the manifests name it)
	// and gives it back on SIGTERM.
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	r := &replica{process: startProcess(t, "rebalancer", "run", "--interval=1h", "--leader-elect", "--dry-run",
		"--bind-address="+addr, "--kubeconfig", saConfig,
		"--policy", filepath.Join(repoRoot, "policies", "binpacking-policy.yaml"),
		"--scheduler-config", filepath.Join(repoRoot, "policies", "binpacking-scheduler.yaml")), addr: addr}
	e.poll("the long-lived mode to lead", func() (bool, error) { return r.leads(), nil })
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-r.done

	// What the ServiceAccount did, from the audit log, against what it may
	// do: every request granted, every rule used.
	used := auditedVerbs(t, "system:serviceaccount:rebalancer-system:rebalancer", started)
	checkRBAC(t, "rebalancer/rbac.yaml", used, rebalancerNotExercised)
	t.Logf("%d distinct requests by the rebalancer ServiceAccount, all granted:\n%s", len(used), joinRequests(used))
}

// rebalancerNotExercised are the rebalancer's rules the test does not reach,
// and why rebalancer needs them.
var rebalancerNotExercised = map[string]string{
	"create coordination.k8s.io/leases":     "the first start in a cluster creates the Lease",
	"create configmaps":                     "the first run in a cluster creates the move history",
	"get scheduling.k8s.io/priorityclasses": "a policy that names its priorityThreshold by class",
	"list metrics.k8s.io/nodes":             "policies and profiles that work by usage (TestLoadAwareMovesPodsOffAHotNode checks it as this ServiceAccount)",
	"list metrics.k8s.io/pods":              "policies and profiles that work by usage (TestLoadAwareMovesPodsOffAHotNode checks it as this ServiceAccount)",
}

type request struct {
	verb, group, resource, subresource string
	code                               int
}

func (r request) String() string {
	res := r.resource
	if r.subresource != "" {
		res += "/" + r.subresource
	}
	return fmt.Sprintf("%s %s %s (%d)", r.verb, r.group, res, r.code)
}

func joinRequests(rs []request) string {
	var s []string
	for _, r := range rs {
		s = append(s, "  "+r.String())
	}
	return strings.Join(s, "\n")
}

// auditedVerbs lists the distinct (verb, resource, status) requests a user
// made since a time, from the audit log.
func auditedVerbs(t *testing.T, user string, since time.Time) []request {
	t.Helper()
	path := envOr("AUDIT_LOG", filepath.Join(filepath.Dir(kubeconfig), "audit.log"))
	// kube-apiserver rotates the log at --audit-log-maxsize: the backups,
	// audit-<time>.log beside it, hold the older requests.
	backups, err := filepath.Glob(strings.TrimSuffix(path, ".log") + "-*.log")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, file := range append(backups, path) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Split(strings.TrimSpace(string(data)), "\n")...)
	}
	seen := map[request]bool{}
	for _, line := range lines {
		var ev struct {
			Verb string `json:"verb"`
			User struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef *struct {
				APIGroup    string `json:"apiGroup"`
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
			RequestReceivedTimestamp time.Time         `json:"requestReceivedTimestamp"`
			Annotations              map[string]string `json:"annotations"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.User.Username != user || ev.ObjectRef == nil || ev.RequestReceivedTimestamp.Before(since) {
			continue
		}
		r := request{verb: ev.Verb, group: ev.ObjectRef.APIGroup, resource: ev.ObjectRef.Resource, subresource: ev.ObjectRef.Subresource}
		if ev.ResponseStatus != nil {
			r.code = ev.ResponseStatus.Code
		}
		if r.code == http.StatusForbidden && ev.Annotations["authorization.k8s.io/decision"] == "allow" {
			// Authorized, then refused by admission: an event for a pod of a
			// test namespace that is being deleted. Not an RBAC matter.
			continue
		}
		seen[r] = true
	}
	var out []request
	for r := range seen {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	if len(out) == 0 {
		t.Fatalf("no request by %s in the audit log", user)
	}
	return out
}

func granted(rules []rbacv1.PolicyRule, r request) bool {
	res := r.resource
	if r.subresource != "" {
		res += "/" + r.subresource
	}
	for _, rule := range rules {
		if slices.Contains(rule.APIGroups, r.group) && slices.Contains(rule.Resources, res) && slices.Contains(rule.Verbs, r.verb) {
			return true
		}
	}
	return false
}

// decodeManifest fills the ClusterRole and the Role of a multi-document file.
func decodeManifest(t *testing.T, path string, cr *rbacv1.ClusterRole, role *rbacv1.Role) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range decodeAll(t, string(data)) {
		switch u.GetKind() {
		case "ClusterRole":
			fromUnstructured(t, u, cr)
		case "Role":
			fromUnstructured(t, u, role)
		}
	}
}

// serviceAccountKubeconfig writes a kubeconfig for the test cluster that
// authenticates with a ServiceAccount token.
// asServiceAccount applies the RBAC manifest at rbac and returns a
// kubeconfig with a 10-minute token of the ServiceAccount
// rebalancer-system/name: the test then runs with exactly the shipped rights.
func (e *testEnv) asServiceAccount(rbac, name string) string {
	e.t.Helper()
	kubectl(e.t, "apply", "--server-side", "--field-manager=rebalancer-e2e", "-f", rbac)
	return serviceAccountKubeconfig(e.t, e.token("rebalancer-system", name))
}

// token is a 10-minute token of the ServiceAccount ns/name.
func (e *testEnv) token(ns, name string) string {
	e.t.Helper()
	tok, err := client.CoreV1().ServiceAccounts(ns).CreateToken(e.ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return tok.Status.Token
}

func serviceAccountKubeconfig(t *testing.T, token string) string {
	t.Helper()
	return serviceAccountKubeconfigIn(t, t.TempDir(), token)
}

func serviceAccountKubeconfigIn(t *testing.T, dir, token string) string {
	t.Helper()
	admin, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cluster := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = cluster
	cfg.AuthInfos["rebalancer"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "rebalancer"}
	cfg.CurrentContext = "local"
	path := filepath.Join(dir, "serviceaccount.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkRBAC checks a ServiceAccount's requests, from the audit log, against
// the rules of its manifest (a path under manifests/): none forbidden, each
// granted, every rule used but for those in notExercised. It returns the
// rules the requests used.
func checkRBAC(t *testing.T, manifest string, used []request, notExercised map[string]string) map[string]bool {
	t.Helper()
	var cr rbacv1.ClusterRole
	var role rbacv1.Role
	decodeManifest(t, filepath.Join(repoRoot, "manifests", manifest), &cr, &role)
	rules := append(append([]rbacv1.PolicyRule{}, cr.Rules...), role.Rules...)
	seen := map[string]bool{}
	for _, u := range used {
		if u.code == 403 {
			t.Errorf("forbidden: %s", u)
		}
		if !granted(rules, u) {
			t.Errorf("not granted by manifests/%s: %s", manifest, u)
		}
		seen[ruleKey(u.verb, u.group, resourceOf(u))] = true
	}
	for _, k := range unusedRules(rules, seen, notExercised) {
		t.Errorf("manifests/%s grants %q, which was never used", manifest, k)
	}
	return seen
}

// unusedRules lists the verbs the rules grant that no request used, but for
// those in allowed.
func unusedRules(rules []rbacv1.PolicyRule, seen map[string]bool, allowed map[string]string) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					k := ruleKey(v, g, res)
					switch {
					case seen[k]:
					case v == "list" && seen[ruleKey("watch", g, res)]:
						// The informer's initial list is a watch-list here;
						// LIST is its fallback.
					case allowed[k] != "":
					default:
						out = append(out, k)
					}
				}
			}
		}
	}
	return out
}

func resourceOf(r request) string {
	if r.subresource != "" {
		return r.resource + "/" + r.subresource
	}
	return r.resource
}

func ruleKey(verb, group, resource string) string {
	if group == "" {
		return verb + " " + resource
	}
	return verb + " " + strings.TrimSuffix(group, "/") + "/" + resource
}
