package main

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rebalancer-dev/rebalancer/hack/internal/harness"
)

// proc is a long-lived process of the run: rebalancer-scheduler or the
// extender.
type proc struct {
	name       string
	cmd        *exec.Cmd
	logFile    *os.File
	metricsURL string
	done       chan struct{}
}

type procSet struct{ scheduler, extender *proc }

func startProc(name, bin string, args []string, logPath, metricsURL string) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logFile: f, metricsURL: metricsURL, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitReady polls url until it answers 200, the process exits or two
// minutes pass.
func (p *proc) waitReady(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return harness.WaitHTTP(ctx, url, p.done, p.name, p.logFile.Name())
}

// peak is the process's peak resident memory so far (VmHWM).
func (p *proc) peak() ProcResult {
	select {
	case <-p.done:
		log.Printf("%s exited during the run (log: %s)", p.name, p.logFile.Name())
		return ProcResult{}
	default:
	}
	rss, err := peakRSS(p.cmd.Process.Pid)
	if err != nil {
		log.Printf("%s: %v", p.name, err)
	}
	return ProcResult{PeakRSSBytes: rss}
}

// stop ends the process (harness.Stop).
func (p *proc) stop() {
	if p == nil {
		return
	}
	harness.Stop(p.cmd.Process, p.done)
	p.logFile.Close()
}

func stopProcs(ps procSet) {
	ps.extender.stop()
	ps.scheduler.stop()
}

// peakRSS reads VmHWM, the peak resident set, of a process from /proc.
func peakRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseVmHWM(f)
}

// parseVmHWM returns the VmHWM line of a /proc/<pid>/status, in bytes.
func parseVmHWM(f interface{ Read([]byte) (int, error) }) (int64, error) {
	s := bufio.NewScanner(f)
	for s.Scan() {
		rest, ok := strings.CutPrefix(s.Text(), "VmHWM:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("cannot read %q", s.Text())
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		return kb << 10, err
	}
	return 0, fmt.Errorf("no VmHWM in /proc/<pid>/status")
}

// startProcs starts rebalancer-scheduler with o's configuration and the
// extender where the cluster's default-scheduler calls it, as the shipped
// manifests run them, against the admin kubeconfig.
func startProcs(ctx context.Context, o options, cl *cluster) (procSet, error) {
	var ps procSet
	shipped, err := os.ReadFile(o.schedulerConfig)
	if err != nil {
		return ps, err
	}
	// The kubeconfig a Deployment's ServiceAccount would give it, and the
	// rate limit of the cluster's own scheduler.
	shipped = fmt.Appendf(shipped, "clientConnection:\n  kubeconfig: %s\n  qps: %d\n  burst: %d\n", cl.kubeconfig(), o.clientQPS, 2*o.clientQPS)
	schedCfg := filepath.Join(o.out, "rebalancer-scheduler.yaml")
	if err := os.WriteFile(schedCfg, shipped, 0o600); err != nil {
		return ps, err
	}
	schedPort, err := harness.FreePort()
	if err != nil {
		return ps, err
	}
	ps.scheduler, err = startProc("rebalancer-scheduler", filepath.Join(o.binDir, "rebalancer-scheduler"),
		[]string{"--config=" + schedCfg, "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", schedPort),
			"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics"},
		filepath.Join(o.out, "rebalancer-scheduler.log"), fmt.Sprintf("https://127.0.0.1:%d/metrics", schedPort))
	if err != nil {
		return ps, err
	}
	if err := ps.scheduler.waitReady(ctx, ps.scheduler.metricsURL); err != nil {
		stopProcs(ps)
		return ps, err
	}
	ext := fmt.Sprintf("127.0.0.1:%d", cl.ports.get("EXTENDER_PORT"))
	ps.extender, err = startProc("extender", filepath.Join(o.binDir, "rebalancer"),
		[]string{"extender", "--bind-address=" + ext, "--kubeconfig", cl.kubeconfig()},
		filepath.Join(o.out, "extender.log"), "http://"+ext+"/metrics")
	if err != nil {
		stopProcs(ps)
		return ps, err
	}
	if err := ps.extender.waitReady(ctx, "http://"+ext+"/readyz"); err != nil {
		stopProcs(ps)
		return ps, err
	}
	return ps, nil
}

// measureCommand runs bin with args to its end, its output in
// <prefix>.out and <prefix>.log, and measures it: wall time, peak RSS and
// the phases its log shows.
func measureCommand(ctx context.Context, bin string, args []string, prefix string) (*CommandResult, error) {
	out, err := os.Create(prefix + ".out")
	if err != nil {
		return nil, err
	}
	defer out.Close()
	logFile, err := os.Create(prefix + ".log")
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = out, logFile
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w (log: %s)", err, logFile.Name())
	}
	wall := time.Since(start)
	res := &CommandResult{Args: args, WallSeconds: seconds(wall)}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.PeakRSSBytes = ru.Maxrss << 10 // kB on Linux
	}
	res.CPUSeconds = seconds(cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime())
	logText, err := os.ReadFile(logFile.Name())
	if err != nil {
		return nil, err
	}
	res.Phases, res.Evicted, res.Moves = phasesOf(string(logText), start)
	return res, nil
}

// controlPlanePeaks are the peak RSS of the control plane's processes
// started from dir (hack/local-cluster.sh records their PIDs).
func controlPlanePeaks(dir string) map[string]int64 {
	out := map[string]int64{}
	files, _ := filepath.Glob(filepath.Join(dir, "pids", "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			continue
		}
		if rss, err := peakRSS(pid); err == nil {
			out[filepath.Base(f)] = rss
		}
	}
	return out
}
