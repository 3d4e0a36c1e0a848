package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/rebalancer-dev/rebalancer/hack/internal/harness"
)

// proc is one long-lived process of the run, started again when it exits,
// as its Deployment would start it; the exits are counted (the run
// asserts there are none).
type proc struct {
	name, bin  string
	args       []string
	logPath    string
	metricsURL string

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	restarts int
	stopping bool
}

func (p *proc) start() error {
	p.mu.Lock()
	stopping := p.stopping
	p.mu.Unlock()
	if stopping {
		return nil
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("%s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logFile.Close()
		close(done)
		p.mu.Lock()
		stopping := p.stopping
		if !stopping {
			p.restarts++
		}
		p.mu.Unlock()
		if stopping {
			return
		}
		log.Printf("%s exited unexpectedly (%v); starting it again (log: %s)", p.name, err, p.logPath)
		time.Sleep(time.Second)
		if err := p.start(); err != nil {
			log.Printf("%s: %v", p.name, err)
		}
	}()
	return nil
}

// waitReady polls url until it answers 200 or the context ends.
func (p *proc) waitReady(ctx context.Context, url string) error {
	return harness.WaitHTTP(ctx, url, nil, p.name, p.logPath)
}

// stop ends the process (harness.Stop) and starts it no more.
func (p *proc) stop() {
	p.mu.Lock()
	p.stopping = true
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	harness.Stop(cmd.Process, done)
}

func (p *proc) exits() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// startProcs starts rebalancer-scheduler, the extender and `rebalancer
// run` as the shipped manifests run them, against the admin kubeconfig.
func startProcs(ctx context.Context, o options) ([]*proc, error) {
	bin := func(b string) string { return filepath.Join(o.binDir, b) }
	policies := filepath.Join(o.root, "policies")
	// The shipped profile, with the kubeconfig a Deployment's
	// ServiceAccount would give it.
	schedCfg := filepath.Join(o.out, "binpacking-scheduler.yaml")
	shipped, err := os.ReadFile(filepath.Join(policies, "binpacking-scheduler.yaml"))
	if err != nil {
		return nil, err
	}
	shipped = append(shipped, fmt.Sprintf("clientConnection:\n  kubeconfig: %s\n", o.kubeconfig)...)
	if err := os.WriteFile(schedCfg, shipped, 0o600); err != nil {
		return nil, err
	}
	schedPort, err := harness.FreePort()
	if err != nil {
		return nil, err
	}
	runPort, err := harness.FreePort()
	if err != nil {
		return nil, err
	}
	runArgs := []string{"run", "--interval=" + o.interval.String(), "--leader-elect",
		fmt.Sprintf("--bind-address=127.0.0.1:%d", runPort), "--kubeconfig", o.kubeconfig,
		"--policy", filepath.Join(policies, "binpacking-policy.yaml"),
		"--scheduler-config", filepath.Join(policies, "binpacking-scheduler.yaml"),
		"--max-per-workload=" + o.maxPerWorkload, "--cooldown=" + o.cooldown.String()}
	// The cluster's default-scheduler with the extender, as
	// hack/local-cluster.sh configures it: without it rebalancer models
	// kube-scheduler's defaults, which follow no hint, and leaves its pods
	// alone.
	if cfg := filepath.Join(filepath.Dir(o.kubeconfig), "kube-scheduler.yaml"); fileExists(cfg) {
		runArgs = append(runArgs, "--scheduler-config", cfg)
	}
	extenderArgs := []string{"extender", "--bind-address=127.0.0.1:" + o.extenderPort, "--kubeconfig", o.kubeconfig}
	if o.followRollouts {
		extenderArgs = append(extenderArgs, "--follow-rollouts")
	}
	procs := []*proc{
		{name: "rebalancer-scheduler", bin: bin("rebalancer-scheduler"),
			args: []string{"--config=" + schedCfg, "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", schedPort),
				// /metrics open on loopback, as a ServiceMonitor's token would make it.
				"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics"},
			metricsURL: fmt.Sprintf("https://127.0.0.1:%d/metrics", schedPort)},
		// The local cluster's default-scheduler calls the extender here.
		{name: "extender", bin: bin("rebalancer"),
			args:       extenderArgs,
			metricsURL: "http://127.0.0.1:" + o.extenderPort + "/metrics"},
		{name: "rebalancer", bin: bin("rebalancer"), args: runArgs,
			metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", runPort)},
	}
	for _, p := range procs {
		p.logPath = filepath.Join(o.out, p.name+".log")
		_ = os.Remove(p.logPath)
		if err := p.start(); err != nil {
			stopProcs(procs)
			return nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := p.waitReady(wctx, p.metricsURL)
		cancel()
		if err != nil {
			stopProcs(procs)
			return nil, err
		}
	}
	return procs, nil
}

func stopProcs(procs []*proc) {
	// The rebalancer first: it removes its drain taints as it stops.
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop()
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
