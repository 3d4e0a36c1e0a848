//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/executor"
)

// TestChartInstallsInDryRun: `helm install` with the chart's defaults on a
// cluster its plan would change evicts nothing; the cycle prints the plan
// and records a RebalancePlanned Event on each pod it would move. After
// `helm upgrade --set dryRun=false` the same CronJob's cycle evicts.
//
// KWOK runs no containers, so the test runs what the installed CronJob's pod
// would: the binary with the CronJob's arguments, the release's ConfigMap as
// its files and the release's ServiceAccount as its identity (found through
// KUBECONFIG, as a pod finds its in-cluster config). The suite's own
// rebalancer-scheduler places the pods, so the release leaves it out
// (scheduler.enabled=false): uninstalling would take its RBAC away.
func TestChartInstallsInDryRun(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	before := uidsOf(taintedWorkload(e))
	const ns = "rebalancer-system"
	release := []string{"rebalancer", chartDir, "--namespace", ns, "--kubeconfig", kubeconfig, "--set", "scheduler.enabled=false"}
	out := helm(t, append([]string{"install", "--take-ownership"}, release...)...)
	t.Cleanup(func() {
		cmd := exec.Command(filepath.Join(binDir, "helm"), "uninstall", "rebalancer", "--namespace", ns, "--kubeconfig", kubeconfig)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("helm uninstall: %v\n%s", err, b)
		}
	})
	for _, want := range []string{"DRY RUN: it evicts nothing", "reason=RebalancePlanned", "--set dryRun=false"} {
		if !strings.Contains(out, want) {
			t.Errorf("helm install's notes lack %q:\n%s", want, out)
		}
	}

	// One cycle of the installed CronJob, as its pod runs it.
	cycle := func(wantDryRun bool) (stdout string, started time.Time) {
		t.Helper()
		cj, err := client.BatchV1().CronJobs(ns).Get(e.ctx, "rebalancer", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		spec := cj.Spec.JobTemplate.Spec.Template.Spec
		args := spec.Containers[0].Args
		if got := slices.Contains(args, "--dry-run"); got != wantDryRun {
			t.Fatalf("the installed CronJob's arguments %q: --dry-run %v, want %v", args, got, wantDryRun)
		}
		cm, err := client.CoreV1().ConfigMaps(ns).Get(e.ctx, spec.Volumes[0].ConfigMap.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		for name, content := range cm.Data {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		var run []string
		for _, a := range args {
			run = append(run, strings.ReplaceAll(a, "/etc/rebalancer/", dir+"/"))
		}
		ctx, cancel := context.WithTimeout(e.ctx, 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "rebalancer"), run...)
		cmd.Env = []string{"KUBECONFIG=" + serviceAccountKubeconfig(t, e.token(ns, spec.ServiceAccountName)), "HOME=" + t.TempDir()}
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		started = time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("rebalancer %s: %v\n%s", strings.Join(run, " "), err, se.String())
		}
		return so.String(), started
	}

	stdout, started := cycle(true)
	if !strings.Contains(stdout, e.ns+"/web-") {
		t.Errorf("the dry-run cycle's output lists no move of %s/web:\n%s", e.ns, stdout)
	}
	for _, r := range auditedVerbs(t, "system:serviceaccount:rebalancer-system:rebalancer", started) {
		read := r.verb == "get" || r.verb == "list" || r.verb == "watch"
		if !read && (r.verb != "create" || r.resource != "events") {
			t.Errorf("the dry-run cycle made %s; want reads and events only", r)
		}
	}
	events, err := client.EventsV1().Events(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	planned := 0
	for _, ev := range events.Items {
		if ev.Reason == executor.EventRebalancePlanned && ev.Regarding.Kind == "Pod" && before[string(ev.Regarding.UID)] {
			planned++
		}
	}
	if planned == 0 {
		t.Errorf("no %s event on a pod of %s", executor.EventRebalancePlanned, e.ns)
	}
	if now := e.podsOf("web"); len(now) != len(before) || !sameUIDs(now, before) {
		t.Fatalf("the dry-run cycle replaced pods of web")
	}

	helm(t, append([]string{"upgrade", "--reuse-values", "--set", "dryRun=false"}, release...)...)
	_, started = cycle(false)
	evicted := false
	for _, r := range auditedVerbs(t, "system:serviceaccount:rebalancer-system:rebalancer", started) {
		evicted = evicted || (r.verb == "create" && r.subresource == "eviction" && r.code < 300)
	}
	if !evicted {
		t.Error("after helm upgrade --set dryRun=false the cycle evicted nothing")
	}
}

// podsOf lists the pods of app in the test's namespace.
func (e *testEnv) podsOf(app string) []v1.Pod {
	e.t.Helper()
	pods, err := client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		e.t.Fatal(err)
	}
	return pods.Items
}

// sameUIDs says whether pods are exactly the pods of uids.
func sameUIDs(pods []v1.Pod, uids map[string]bool) bool {
	for _, p := range pods {
		if !uids[string(p.UID)] {
			return false
		}
	}
	return len(pods) == len(uids)
}
