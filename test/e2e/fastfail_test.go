//go:build e2e

package e2e

import (
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestPlanUnreachableServer: a kubeconfig whose server refuses connections
// fails within seconds, naming the server and the cause.
func TestPlanUnreachableServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := "https://" + l.Addr().String()
	l.Close() // nothing listens there now
	kc := clientcmdapi.NewConfig()
	kc.Clusters["closed"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	kc.AuthInfos["closed"] = &clientcmdapi.AuthInfo{Token: "unused"}
	kc.Contexts["closed"] = &clientcmdapi.Context{Cluster: "closed", AuthInfo: "closed"}
	kc.CurrentContext = "closed"
	path := filepath.Join(t.TempDir(), "closed.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"plan"}, {"run", "--once"}} {
		start := time.Now()
		cmd := exec.Command(filepath.Join(binDir, "rebalancer"), append(args, "--kubeconfig", path,
			"--policy", filepath.Join(repoRoot, "policies", "binpacking-policy.yaml"),
			"--scheduler-config", filepath.Join(repoRoot, "policies", "binpacking-scheduler.yaml"))...)
		out, err := cmd.CombinedOutput()
		took := time.Since(start)
		if err == nil {
			t.Fatalf("%s succeeded against a closed port:\n%s", args[0], out)
		}
		if took > 15*time.Second {
			t.Errorf("%s took %s to fail, want under 15 s", args[0], took.Round(time.Millisecond))
		}
		if !strings.Contains(string(out), server) || !strings.Contains(string(out), "connection refused") {
			t.Errorf("%s: the error does not name the server %s and the cause:\n%s", args[0], server, out)
		}
		t.Logf("%s failed in %s: %s", args[0], took.Round(time.Millisecond), strings.TrimSpace(string(out)))
	}
}

// TestSIGTERMDuringSync: SIGTERM while the first view of the cluster is
// being read (pods are listed slowly here) ends the process within 2 s.
func TestSIGTERMDuringSync(t *testing.T) {
	proxy := newFaultProxy(t)
	proxy.inject(&fault{name: "pod list slow", match: func(r *http.Request) bool {
		return r.Method == http.MethodGet && r.URL.Path == "/api/v1/pods"
	}, delay: 10 * time.Second})
	p := startProcess(t, "rebalancer", "plan", "--kubeconfig", proxy.Kubeconfig,
		"--policy", filepath.Join(repoRoot, "policies", "binpacking-policy.yaml"),
		"--scheduler-config", filepath.Join(repoRoot, "policies", "binpacking-scheduler.yaml"))
	deadline := time.Now().Add(20 * time.Second)
	for !slowListSeen(proxy) {
		if time.Now().After(deadline) {
			t.Fatal("the pod list never reached the proxy")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // well inside the sync
	_, took := p.terminate(t, 10*time.Second)
	if took > 2*time.Second {
		t.Errorf("took %s to end after SIGTERM, want under 2 s", took.Round(time.Millisecond))
	}
	if p.err == nil {
		t.Error("exit status 0 after SIGTERM during the sync, want non-zero: nothing was planned")
	}
}

func slowListSeen(p *faultProxy) bool {
	for _, r := range p.requests() {
		if r.fault == "pod list slow" {
			return true
		}
	}
	return false
}
