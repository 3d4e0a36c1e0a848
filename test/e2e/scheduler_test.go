//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// schedulerConfig reads a shipped profile from policies/ and points it at the
// test cluster. kube-scheduler started with --config takes its kubeconfig
// from the file only, so it is set there; edit may change more.
func schedulerConfig(t *testing.T, policy string, edit func(cfg map[string]any)) string {
	t.Helper()
	return schedulerConfigFrom(t, filepath.Join(repoRoot, "policies", policy), edit)
}

// schedulerConfigFrom is schedulerConfig for a configuration file anywhere.
func schedulerConfigFrom(t *testing.T, file string, edit func(cfg map[string]any)) string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["clientConnection"] = map[string]any{"kubeconfig": kubeconfig}
	if edit != nil {
		edit(cfg)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), filepath.Base(file))
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// scheduler is the rebalancer-scheduler process shared by the tests, started
// by the first test that needs it and stopped after the last. Tests keep to
// their own nodes, so they do not see each other's pods. One process for all
// also spares every test a wait for the previous leader's lease to expire.
var scheduler struct {
	sync.Mutex
	cmd     *exec.Cmd
	exited  chan error
	logPath string
	err     error
	// started is when the first process was started: its requests in the
	// audit log are those since.
	started time.Time
	// config is the process's configuration file, kept for restarts.
	config string
}

// needScheduler makes sure rebalancer-scheduler runs with the shipped
// bin-packing profile, healthy and leading.
func needScheduler(t *testing.T) {
	t.Helper()
	scheduler.Lock()
	defer scheduler.Unlock()
	if scheduler.cmd == nil && scheduler.err == nil {
		// As shipped: the scheduler's own ServiceAccount with the RBAC of
		// manifests/scheduler, so the suite exercises exactly those rights
		// (TestSchedulerRBAC checks them against the audit log).
		kc := schedulerServiceAccount(t)
		scheduler.started = time.Now()
		scheduler.config = filepath.Join(filepath.Dir(kc), "binpacking-scheduler.yaml")
		scheduler.err = copyFile(schedulerConfig(t, "binpacking-scheduler.yaml", func(cfg map[string]any) {
			cfg["clientConnection"] = map[string]any{"kubeconfig": kc}
		}), scheduler.config)
		if scheduler.err == nil {
			scheduler.err = startScheduler(scheduler.config)
		}
	}
	if scheduler.err != nil {
		t.Fatalf("rebalancer-scheduler: %v", scheduler.err)
	}
	select {
	case err := <-scheduler.exited:
		// kube-scheduler exits when it cannot renew its Lease, e.g. while
		// kube-apiserver restarts (TestAPIServerRestartMidCycle); its
		// Deployment would start it again, and so does the suite.
		t.Logf("rebalancer-scheduler had exited (%v); starting it again", err)
		if scheduler.err = startScheduler(scheduler.config); scheduler.err != nil {
			t.Fatalf("rebalancer-scheduler: %v", scheduler.err)
		}
	default:
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rebalancer-scheduler log %s:\n%s", scheduler.logPath, tail(scheduler.logPath, 40))
		}
	})
}

// copyFile copies a file out of a test's temporary directory into one that
// outlives the test.
func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o600)
}

func startScheduler(config string) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "rebalancer-e2e-")
	if err != nil {
		return err
	}
	scheduler.logPath = filepath.Join(dir, "rebalancer-scheduler.log")
	logFile, err := os.Create(scheduler.logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(binDir, "rebalancer-scheduler"), "--config="+config,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port), "-v=2")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return err
	}
	scheduler.cmd, scheduler.exited = cmd, make(chan error, 1)
	go func() { scheduler.exited <- cmd.Wait(); logFile.Close() }()

	httpClient := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = wait.PollUntilContextCancel(ctx, pollEvery, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-scheduler.exited:
			return false, fmt.Errorf("exited: %v\n%s", err, tail(scheduler.logPath, 40))
		default:
		}
		resp, err := httpClient.Get(fmt.Sprintf("https://127.0.0.1:%d/healthz", port))
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if string(body) != "ok" {
			return false, nil
		}
		// Leader election is on, as shipped: scheduling starts once it leads.
		log, _ := os.ReadFile(scheduler.logPath)
		return strings.Contains(string(log), `"Successfully acquired lease" lock="rebalancer-system/rebalancer-scheduler"`), nil
	})
	if err != nil {
		return fmt.Errorf("not ready: %w\n%s", err, tail(scheduler.logPath, 40))
	}
	return nil
}

// stopScheduler ends the shared process, if any: SIGTERM, then SIGKILL.
func stopScheduler() {
	scheduler.Lock()
	defer scheduler.Unlock()
	if scheduler.cmd == nil {
		return
	}
	_ = scheduler.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-scheduler.exited:
		log.Printf("rebalancer-scheduler stopped: %v", err)
	case <-time.After(20 * time.Second):
		_ = scheduler.cmd.Process.Kill()
	}
}

// tail returns the last n lines of a log file, or says why there are none:
// a failed test must not print an empty log as if the process wrote nothing.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	switch {
	case err != nil:
		return fmt.Sprintf("(cannot read the log: %v)", err)
	case len(b) == 0:
		return "(the log is empty)"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestSchedulerRejectsBadConfig: a bad profile stops rebalancer-scheduler
// with a message naming the bad value, before it schedules anything.
// schedulerServiceAccount applies manifests/scheduler's RBAC and returns a
// kubeconfig with a token of the rebalancer-scheduler ServiceAccount, valid
// for the whole suite.
func schedulerServiceAccount(t *testing.T) string {
	t.Helper()
	kubectl(t, "apply", "--server-side", "--field-manager=rebalancer-e2e", "-f", filepath.Join(repoRoot, "manifests", "scheduler", "rbac.yaml"))
	tok, err := client.CoreV1().ServiceAccounts("rebalancer-system").CreateToken(context.Background(), "rebalancer-scheduler",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3 * 3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Not in t.TempDir(): the process outlives the test that starts it, and
	// may be restarted.
	dir, err := os.MkdirTemp("", "rebalancer-scheduler-sa-")
	if err != nil {
		t.Fatal(err)
	}
	return serviceAccountKubeconfigIn(t, dir, tok.Status.Token)
}

func TestSchedulerRejectsBadConfig(t *testing.T) {
	cases := []struct {
		name string
		edit func(cfg map[string]any)
		want string
	}{
		{
			name: "misspelt scoring strategy",
			edit: func(cfg map[string]any) {
				pluginArgs(cfg, "NodeResourcesFit")["scoringStrategy"].(map[string]any)["type"] = "MostAlocated"
			},
			want: "MostAlocated",
		},
		{
			name: "misspelt RebalanceHint argument",
			edit: func(cfg map[string]any) {
				args := pluginArgs(cfg, "RebalanceHint")
				delete(args, "hintTTL")
				args["hintTtl"] = "5m"
			},
			want: `unknown field \"hintTtl\"`, // klog quotes the error
		},
		{
			name: "RebalanceHint TTL out of range",
			edit: func(cfg map[string]any) { pluginArgs(cfg, "RebalanceHint")["hintTTL"] = "0.5s" },
			want: "args.hintTTL",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			config := schedulerConfig(t, "binpacking-scheduler.yaml", func(cfg map[string]any) {
				cfg["leaderElection"] = map[string]any{"leaderElect": false}
				tc.edit(cfg)
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, filepath.Join(binDir, "rebalancer-scheduler"), "--config="+config,
				"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", freePort(t))).CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("rebalancer-scheduler kept running with a bad config:\n%s", out)
			}
			if err == nil {
				t.Fatalf("rebalancer-scheduler exited 0 with a bad config:\n%s", out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("output does not name %q:\n%s", tc.want, out)
			}
		})
	}
}

// pluginArgs returns the args map of a plugin in the first profile.
func pluginArgs(cfg map[string]any, plugin string) map[string]any {
	profile := cfg["profiles"].([]any)[0].(map[string]any)
	for _, pc := range profile["pluginConfig"].([]any) {
		if m := pc.(map[string]any); m["name"] == plugin {
			return m["args"].(map[string]any)
		}
	}
	panic("no pluginConfig for " + plugin)
}
