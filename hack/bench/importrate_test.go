package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/rebalancer-dev/rebalancer/pkg/openb"
)

// TestRepeatList: the generated list is the seed list repeated with new
// names and shifted times, reads back as a valid pod list, and is the same
// bytes every time.
func TestRepeatList(t *testing.T) {
	seed := []openb.Pod{
		{Name: "a", MilliCPU: 1000, MemoryMiB: 512, QoS: "LS", Phase: "Running", Created: 0, Deleted: 255},
		{Name: "b", MilliCPU: 2000, MemoryMiB: 1024, GPUs: 1, GPUMilli: 500, GPUModels: []string{"G1", "V100M16"}, QoS: "BE", Phase: "Failed", Created: 10, Deleted: -1},
	}
	list, last, err := repeatList(seed, 5)
	if err != nil {
		t.Fatal(err)
	}
	again, _, _ := repeatList(seed, 5)
	if !bytes.Equal(list, again) {
		t.Error("two generations differ")
	}
	pods, err := openb.ReadPods("generated", bytes.NewReader(list))
	if err != nil {
		t.Fatalf("the generated list does not read back: %v\n%s", err, list)
	}
	if len(pods) != 5 {
		t.Fatalf("%d pods, want 5", len(pods))
	}
	stride := int64(256 / importDensity) // the span is the last second + 1
	for i, p := range pods {
		k, s := int64(i/len(seed)), seed[i%len(seed)]
		want := s
		want.Name = s.Name + "-r" + string(rune('0'+k))
		want.Created += k * stride
		if s.Deleted >= 0 {
			want.Deleted += k * stride
		}
		if p.Name != want.Name || p.Created != want.Created || p.Deleted != want.Deleted || p.GPUMilli != want.GPUMilli ||
			len(p.GPUModels) != len(want.GPUModels) || p.QoS != want.QoS || p.Phase != want.Phase {
			t.Errorf("pod %d = %+v, want %+v", i, p, want)
		}
	}
	if want := 255 + 2*stride; last != want {
		t.Errorf("last second %d, want %d", last, want)
	}
	if _, _, err := repeatList(nil, 5); err == nil {
		t.Error("an empty seed list: no error")
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1000000: "1,000,000", 12345678: "12,345,678"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestImportLine: the table ends with the import rate, its spread with
// several runs, and says nothing of it without a measurement.
func TestImportLine(t *testing.T) {
	r := Results{Runs: 3, Spread: map[string][2]float64{importKey: {90.5, 120.25}},
		Import: &ImportResult{Pods: 1000000, Events: 2000000, EventsPerS: 21000, Seconds: 95.24, RSSMiB: 650}}
	out := captureStdout(t, func() { printTable(r) })
	for _, want := range []string{"openb import, 1,000,000 pods: 21000 events/s, 650 MiB, 95.24 s (90.50-120.25)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	r.Import = nil
	if out := captureStdout(t, func() { printTable(r) }); strings.Contains(out, "openb import") {
		t.Errorf("an import line without a measurement:\n%s", out)
	}
}

func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	defer func() { os.Stdout = stdout }()
	f()
	w.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
