package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeconfigFile writes a kubeconfig with one cluster and context per
// server, the first context current.
func kubeconfigFile(t *testing.T, name string, servers map[string]string, current string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Config\n")
	if current != "" {
		fmt.Fprintf(&b, "current-context: %s\n", current)
	}
	b.WriteString("clusters:\n")
	for ctx, server := range servers {
		fmt.Fprintf(&b, "- name: %s\n  cluster: {server: %q}\n", ctx, server)
	}
	b.WriteString("contexts:\n")
	for ctx := range servers {
		fmt.Fprintf(&b, "- name: %s\n  context: {cluster: %s, user: u}\n", ctx, ctx)
	}
	b.WriteString("users:\n- name: u\n  user: {token: t}\n")
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// isolate gives the test an environment with no cluster in it: no
// KUBECONFIG, an empty home, not in a pod.
func isolate(t *testing.T) (home string) {
	t.Helper()
	home = t.TempDir()
	t.Setenv("KUBECONFIG", "")
	// clientcmd reads $HOME once, when the process starts.
	homeFile := clientcmd.RecommendedHomeFile
	clientcmd.RecommendedHomeFile = filepath.Join(home, ".kube", "config")
	t.Cleanup(func() { clientcmd.RecommendedHomeFile = homeFile })
	inCluster := inClusterConfig
	inClusterConfig = func() (*rest.Config, error) { return nil, rest.ErrNotInCluster }
	t.Cleanup(func() { inClusterConfig = inCluster })
	return home
}

func TestRestConfigFindsTheClusterAsKubectlDoes(t *testing.T) {
	a := kubeconfigFile(t, "a", map[string]string{"alpha": "https://alpha:6443"}, "alpha")
	// b names no current context: merged after a, a's stays current.
	b := kubeconfigFile(t, "b", map[string]string{"beta": "https://beta:6443"}, "")
	bCurrent := kubeconfigFile(t, "b-current", map[string]string{"beta": "https://beta:6443"}, "beta")
	podConfig := &rest.Config{Host: "https://10.0.0.1:443"}
	cases := []struct {
		name       string
		flags      clientFlags
		env        string
		homeFile   bool
		inCluster  bool
		wantHost   string
		wantSource string
	}{
		{name: "--kubeconfig over everything", flags: clientFlags{kubeconfig: bCurrent}, env: a, homeFile: true, inCluster: true,
			wantHost: "https://beta:6443", wantSource: "--kubeconfig " + bCurrent},
		{name: "KUBECONFIG merged, the first file's current context", env: a + string(os.PathListSeparator) + b, homeFile: true, inCluster: true,
			wantHost: "https://alpha:6443", wantSource: "KUBECONFIG="},
		{name: "KUBECONFIG with --context from its second file", flags: clientFlags{context: "beta"}, env: a + string(os.PathListSeparator) + b,
			wantHost: "https://beta:6443", wantSource: "--context beta"},
		{name: "in-cluster before the home file", homeFile: true, inCluster: true,
			wantHost: podConfig.Host, wantSource: "in-cluster config"},
		{name: "the home file outside a pod", homeFile: true,
			wantHost: "https://home:6443", wantSource: ".kube/config"},
		{name: "--context reads the home file, not the pod's config", flags: clientFlags{context: "home"}, homeFile: true, inCluster: true,
			wantHost: "https://home:6443", wantSource: ".kube/config --context home"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := isolate(t)
			t.Setenv("KUBECONFIG", tc.env)
			if tc.homeFile {
				if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o755); err != nil {
					t.Fatal(err)
				}
				src := kubeconfigFile(t, "home", map[string]string{"home": "https://home:6443"}, "home")
				data, _ := os.ReadFile(src)
				if err := os.WriteFile(filepath.Join(home, ".kube", "config"), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tc.inCluster {
				inClusterConfig = func() (*rest.Config, error) { return rest.CopyConfig(podConfig), nil }
			}
			cfg, source, err := tc.flags.restConfig()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.wantHost {
				t.Errorf("server %s, want %s", cfg.Host, tc.wantHost)
			}
			if !strings.Contains(source, tc.wantSource) {
				t.Errorf("source %q, want it to name %q", source, tc.wantSource)
			}
		})
	}
}

func TestRestConfigSaysWhatItTried(t *testing.T) {
	isolate(t)
	_, _, err := (&clientFlags{}).restConfig()
	if err == nil {
		t.Fatal("found a cluster in an empty environment")
	}
	for _, want := range []string{"no cluster to connect to", "--kubeconfig not given", "KUBECONFIG not set", "not in a pod", ".kube/config"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// plan says how to plan without a cluster.
	_, err = run("plan", "--policy", binPolicy, "--scheduler-config", binSched)
	if err == nil || !strings.Contains(err.Error(), "no cluster to connect to") || !strings.Contains(err.Error(), "give --snapshot FILE") {
		t.Errorf("plan with no cluster: %v, want what it tried and --snapshot", err)
	}

	// A pod whose service account token is missing: said, not skipped.
	inClusterConfig = func() (*rest.Config, error) { return nil, errors.New("open token: no such file") }
	if _, _, err := (&clientFlags{}).restConfig(); err == nil || !strings.Contains(err.Error(), "in-cluster config: open token") {
		t.Errorf("error %v, want the in-cluster config's", err)
	}

	// A context the kubeconfig lacks is named.
	t.Setenv("KUBECONFIG", kubeconfigFile(t, "a", map[string]string{"alpha": "https://alpha:6443"}, "alpha"))
	if _, _, err := (&clientFlags{context: "prod"}).restConfig(); err == nil || !strings.Contains(err.Error(), `"prod"`) {
		t.Errorf("error %v, want it to name the missing context", err)
	}
}
