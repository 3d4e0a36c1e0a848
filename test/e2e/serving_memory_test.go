//go:build e2e

package e2e

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/rebalancer-dev/rebalancer/internal/testcert"
)

// chartMemoryLimit is the memory limit the chart's values.yaml gives a
// component (extender, webhook).
func chartMemoryLimit(t *testing.T, component string) resource.Quantity {
	t.Helper()
	var values map[string]json.RawMessage
	var c struct {
		Resources struct {
			Limits map[string]resource.Quantity `json:"limits"`
		} `json:"resources"`
	}
	data := mustRead(t, filepath.Join(repoRoot, chartDir, "values.yaml"))
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(values[component], &c); err != nil {
		t.Fatalf("values.yaml: %s: %v", component, err)
	}
	limit, ok := c.Resources.Limits["memory"]
	if !ok {
		t.Fatalf("values.yaml: no %s.resources.limits.memory", component)
	}
	return limit
}

// peakRSS is the most memory a process has held: VmHWM of /proc/pid/status.
func peakRSS(t *testing.T, p *process) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib << 10
		}
	}
	t.Fatalf("/proc/%d/status: no VmHWM", p.cmd.Process.Pid)
	return 0
}

// flood posts body to url from senders goroutines, rounds times each, and
// returns how many answers had each status code.
func flood(t *testing.T, client *http.Client, url string, body []byte, senders, rounds int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for range rounds {
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				code := -1
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return codes
}

// bigPod is a pod of about size bytes as JSON, the bulk in an annotation.
func bigPod(size int) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{
			"name": "big", "namespace": "default", "uid": "7e57-0000", "generateName": "big-",
			"ownerReferences": []any{map[string]any{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "big-5d8f9c7b6", "uid": "7e57-0001", "controller": true}},
			"annotations":     map[string]any{"example.com/blob": strings.Repeat("x", size)},
		},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}},
	}
}

// TestServersStayWithinTheChartsMemory: the extender and the webhook, each
// the built binary in its own process, flooded by 16 callers at once with
// the largest requests they take (a 3 MiB pod with 5,000 node names of 253
// characters; a review of a 3.5 MiB pod) stay below the memory limit the
// chart gives them; larger requests are refused with 413 without being
// read, whether their size is declared or not.
func TestServersStayWithinTheChartsMemory(t *testing.T) {
	const senders, rounds = 16, 6
	t.Run("extender", func(t *testing.T) {
		limit := chartMemoryLimit(t, "extender")
		e := newTestEnv(t)
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		p := startProcess(t, "rebalancer", "extender", "--bind-address="+addr, "--kubeconfig", kubeconfig)
		p.waitUp(e, "the extender to be ready", func() bool { return answers("http://" + addr + "/readyz") })
		url := "http://" + addr + "/prioritize"

		names := make([]string, 5000)
		for i := range names {
			names[i] = fmt.Sprintf("%0253d", i)
		}
		largest, err := json.Marshal(map[string]any{"Pod": bigPod(3 << 20), "NodeNames": names})
		if err != nil {
			t.Fatal(err)
		}
		codes := flood(t, http.DefaultClient, url, largest, senders, rounds)
		if codes[http.StatusOK] != senders*rounds {
			t.Errorf("%d requests of %d bytes: answers %v, want all 200", senders*rounds, len(largest), codes)
		}

		tooLarge, err := json.Marshal(map[string]any{"Pod": bigPod(1 << 10), "NodeNames": make([]string, 10_000_000)})
		if err != nil {
			t.Fatal(err)
		}
		if codes := flood(t, http.DefaultClient, url, tooLarge, senders, 1); codes[http.StatusRequestEntityTooLarge] != senders {
			t.Errorf("%d requests of %d bytes: answers %v, want all 413", senders, len(tooLarge), codes)
		}
		checkUndeclared(t, http.DefaultClient, url, tooLarge)

		peak := peakRSS(t, p)
		t.Logf("extender: peak RSS %d MiB, the chart's limit %s", peak>>20, limit.String())
		if peak >= limit.Value() {
			t.Errorf("extender: peak RSS %d MiB, at or over the chart's limit %s", peak>>20, limit.String())
		}
	})

	t.Run("webhook", func(t *testing.T) {
		limit := chartMemoryLimit(t, "webhook")
		e := newTestEnv(t)
		cert, key, _ := testcert.Write(t, t.TempDir())
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		p := startProcess(t, "rebalancer", "webhook", "--bind-address="+addr, "--tls-cert-file", cert, "--tls-private-key-file", key)
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: time.Minute} //nolint:gosec // the test's own certificate
		p.waitUp(e, "the webhook to answer", func() bool {
			resp, err := client.Get("https://" + addr + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		url := "https://" + addr + "/mutate"
		review := func(podSize int) []byte {
			data, err := json.Marshal(map[string]any{
				"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
				"request": map[string]any{
					"uid": "7e57-0002", "kind": map[string]any{"group": "", "version": "v1", "kind": "Pod"},
					"resource":  map[string]any{"group": "", "version": "v1", "resource": "pods"},
					"namespace": "default", "operation": "CREATE", "object": bigPod(podSize),
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
		largest := review(3<<20 + 512<<10)
		codes := flood(t, client, url, largest, senders, rounds)
		if codes[http.StatusOK] != senders*rounds {
			t.Errorf("%d reviews of %d bytes: answers %v, want all 200", senders*rounds, len(largest), codes)
		}
		tooLarge := review(7 << 20)
		if codes := flood(t, client, url, tooLarge, senders, 1); codes[http.StatusRequestEntityTooLarge] != senders {
			t.Errorf("%d reviews of %d bytes: answers %v, want all 413", senders, len(tooLarge), codes)
		}
		checkUndeclared(t, client, url, tooLarge)

		peak := peakRSS(t, p)
		t.Logf("webhook: peak RSS %d MiB, the chart's limit %s", peak>>20, limit.String())
		if peak >= limit.Value() {
			t.Errorf("webhook: peak RSS %d MiB, at or over the chart's limit %s", peak>>20, limit.String())
		}
	})
}

// checkUndeclared posts body without a Content-Length (chunked): the
// server reads up to its cap, then answers 413.
func checkUndeclared(t *testing.T, client *http.Client, url string, body []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, io.MultiReader(bytes.NewReader(body))) // not a *bytes.Reader: no length
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("a chunked body of %d bytes: %v", len(body), err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if req.ContentLength != 0 || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a chunked body of %d bytes: %d %s, want 413", len(body), resp.StatusCode, msg)
	}
}
