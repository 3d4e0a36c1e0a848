package report

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rebalancer-dev/rebalancer/pkg/rounds/result"
)

// fakeResult builds a Result with the given evictions per round after round 0,
// nodes in use shrinking by one per eviction, and n nodes whose utilization
// varies from node to node.
func fakeResult(strategy string, evictions []int, n int) *result.Result {
	r := &result.Result{Strategy: strategy}
	inUse := n
	r.Rounds = append(r.Rounds, result.Round{Round: 0, NodesInUse: inUse, LowerBound: n / 2})
	for i, e := range evictions {
		inUse -= e
		r.Rounds = append(r.Rounds, result.Round{Round: i + 1, Evictions: e, PingPong: e / 3, NodesInUse: inUse, LowerBound: n / 2})
		if e == 0 && r.ConvergedAt == 0 {
			r.ConvergedAt = i + 1
		}
	}
	for i := range n {
		node := fmt.Sprintf("node-%d", i)
		r.NodesBefore = append(r.NodesBefore, result.NodeUtil{Node: node, CPU: float64(i*37%100) + 0.25, Memory: float64(i*53%100) + 0.5})
		r.NodesAfter = append(r.NodesAfter, result.NodeUtil{Node: node, CPU: float64(i*71%100) + 0.75, Memory: float64(i*29%100) + 0.125})
	}
	return r
}

func sample() *result.Comparison {
	return &result.Comparison{
		Rebalancer: fakeResult("rebalancer", []int{3, 2, 0}, 12),
		Baseline:   fakeResult("upstream", []int{4, 1, 2, 1, 1}, 12),
	}
}

// wantMarks is the marks each chart must hold for c: one point per round
// and one line per strategy with rounds, one eviction bar per round and
// strategy, and one CPU and one memory bar per node.
func wantMarks(c *result.Comparison) map[string]map[string]int {
	want := map[string]map[string]int{"nodes-in-use": {}, "evictions": {}}
	add := func(chart, mark string, n int) {
		if want[chart] == nil {
			want[chart] = map[string]int{}
		}
		if n > 0 {
			want[chart][mark] = n
		}
	}
	add("nodes-in-use", "path.lower-bound", min(len(c.Rebalancer.Rounds), 1))
	for _, s := range seriesOf(c) {
		add("nodes-in-use", "path.line."+s.Role, min(len(s.Rounds), 1))
		add("nodes-in-use", "circle.point."+s.Role, len(s.Rounds))
		add("evictions", "rect.bar."+s.Role, len(s.Rounds))
		for _, chart := range []struct {
			key   string
			nodes int
		}{{"util-before-" + s.Role, len(s.NodesBefore)}, {"util-after-" + s.Role, len(s.NodesAfter)}} {
			add(chart.key, "rect.cpu", chart.nodes)
			add(chart.key, "rect.mem", chart.nodes)
		}
	}
	return want
}

// marks counts, per data-chart, its rect, path and circle elements by
// element name and classes, e.g. "rect.bar.rebalancer". Strict parsing
// requires well-formed markup, as Write produces; lenient parsing reads the
// HTML serialization a browser dumps.
func marks(doc []byte, strict bool) (map[string]map[string]int, error) {
	d := xml.NewDecoder(bytes.NewReader(doc))
	d.Strict = strict
	d.Entity = xml.HTMLEntity
	if !strict {
		d.AutoClose = xml.HTMLAutoClose
	}
	counts := map[string]map[string]int{}
	var charts []string // the chart enclosing each open element, "" outside charts
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return counts, nil
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			chart, class := "", ""
			if len(charts) > 0 {
				chart = charts[len(charts)-1]
			}
			for _, a := range t.Attr {
				switch a.Name.Local {
				case "data-chart":
					chart = a.Value
					if counts[chart] != nil {
						return nil, fmt.Errorf("chart %q appears twice", chart)
					}
					counts[chart] = map[string]int{}
				case "class":
					class = a.Value
				}
			}
			charts = append(charts, chart)
			switch t.Name.Local {
			case "rect", "path", "circle":
				if chart != "" && class != "" {
					counts[chart][t.Name.Local+"."+strings.Join(strings.Fields(class), ".")]++
				}
			}
		case xml.EndElement:
			charts = charts[:len(charts)-1]
		}
	}
}

func checkMarks(t *testing.T, doc []byte, strict bool, c *result.Comparison) {
	t.Helper()
	got, err := marks(doc, strict)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	want := wantMarks(c)
	for chart := range want {
		if !maps.Equal(got[chart], want[chart]) {
			t.Errorf("chart %s: marks %v, want %v", chart, got[chart], want[chart])
		}
	}
	for chart := range got {
		if _, ok := want[chart]; !ok {
			t.Errorf("unexpected chart %s", chart)
		}
	}
}

func render(t *testing.T, title string, c *result.Comparison) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, Meta{Title: title, Version: "rebalancer v0.1.0", Date: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), Command: "rebalancer simulate --snapshot s.yaml"}, c); err != nil {
		t.Fatalf("Write: %v", err)
	}
	return buf.Bytes()
}

func TestWrite(t *testing.T) {
	for name, c := range map[string]*result.Comparison{
		"with baseline":    sample(),
		"without baseline": {Rebalancer: sample().Rebalancer},
		"empty":            {Rebalancer: &result.Result{}, Baseline: &result.Result{}},
	} {
		t.Run(name, func(t *testing.T) {
			doc := render(t, "Cluster <prod> & co", c)
			if !bytes.HasPrefix(doc, []byte("<!DOCTYPE html>\n<html")) {
				t.Errorf("no HTML5 doctype: %.40q", doc)
			}
			checkMarks(t, doc, true, c)
			if !bytes.Contains(doc, []byte("<h1>Cluster &lt;prod&gt; &amp; co</h1>")) {
				t.Error("the title is missing or not escaped")
			}
			// Self-contained: nothing the browser would fetch, from the
			// network or elsewhere. The SVG needs no xmlns in HTML, so not
			// even a namespace URL appears.
			for _, ref := range []string{"://", "src=", "href=", "url(", "@import", "<script", "<link"} {
				if bytes.Contains(doc, []byte(ref)) {
					t.Errorf("the page contains %q", ref)
				}
			}
		})
	}
}

func TestWriteNoRebalancer(t *testing.T) {
	for _, c := range []*result.Comparison{nil, {Baseline: sample().Baseline}} {
		if err := Write(io.Discard, Meta{Title: "x"}, c); err == nil {
			t.Errorf("Write(%v) succeeded, want an error", c)
		}
	}
}

func TestSummary(t *testing.T) {
	c := sample()
	c.Rebalancer.Rounds[1].Placed, c.Rebalancer.Rounds[2].Placed = 2, 1
	c.Rebalancer.Rounds[0].ClassLowerBound = 8
	got := summarize(seriesOf(c)[0])
	want := summaryRow{
		Role: "rebalancer", Name: "rebalancer",
		Evictions: 5, PingPong: 1, Placed: 3,
		NodesFirst: "12", NodesLast: "7 (round 3)", LowerBound: "6 (by node class 8)",
		ConvergedAt: "3", Unschedulable: "0",
	}
	if got != want {
		t.Errorf("summary %+v, want %+v", got, want)
	}
	c.Baseline.ConvergedAt = 0
	if got := summarize(seriesOf(c)[1]); got.ConvergedAt != "not converged" || got.Name != "upstream" || got.Role != "baseline" {
		t.Errorf("baseline summary %+v", got)
	}
	doc := render(t, "x", c)
	if !bytes.Contains(doc, []byte(`<tr data-strategy="rebalancer"><th><span class="swatch rebalancer"></span>rebalancer</th><td>5</td><td>1</td><td>12</td><td>7 (round 3)</td><td>6 (by node class 8)</td><td>3</td><td>0</td><td>3</td></tr>`)) {
		t.Error("the summary table lacks rebalancer's row")
	}
	if n := bytes.Count(doc, []byte(`text-anchor="end">round</text>`)); n != 2 {
		t.Errorf("%d per-round charts with their x axis named, want 2", n)
	}
}

// Bars are sorted highest first and their tops and heights add up to the
// panel's height, so each bar stands on the panel's bottom.
func TestUtilBars(t *testing.T) {
	c := newUtilChart("k", "t", sample().Rebalancer.NodesBefore)
	for _, p := range c.Panels {
		for i, b := range p.Bars {
			if b.X != i || b.Y+b.H != p.Max {
				t.Errorf("%s bar %d: %+v in a panel %v high", p.Class, i, b, p.Max)
			}
			if i > 0 && b.H > p.Bars[i-1].H {
				t.Errorf("%s bar %d is higher than the one before", p.Class, i)
			}
		}
	}
}

// With the cluster's usage, the charts plot it below the requests; without,
// they do not.
func TestUtilPlotsUsage(t *testing.T) {
	nodes := sample().Rebalancer.NodesBefore
	if c := newUtilChart("k", "t", nodes); len(c.Panels) != 2 {
		t.Fatalf("%d panels without usage, want 2", len(c.Panels))
	}
	for i := range nodes {
		cpu, mem := float64(10*(i+1)), 5.0
		nodes[i].UsedCPU, nodes[i].UsedMemory = &cpu, &mem
	}
	c := newUtilChart("k", "t", nodes)
	if len(c.Panels) != 4 || c.Panels[2].Label != "CPU used, % of allocatable" || c.Panels[3].Label != "Memory used, % of allocatable" {
		t.Fatalf("panels %+v, want requests then usage", c.Panels)
	}
	if top := c.Panels[2].Bars[0]; top.H != float64(10*len(nodes)) {
		t.Errorf("highest CPU used bar %v, want %d", top.H, 10*len(nodes))
	}
	if last := c.Panels[3]; last.Top+last.Height > c.Bottom {
		t.Errorf("the last panel ends at %v, below the chart's bottom %v", last.Top+last.Height, c.Bottom)
	}
	cmp := sample()
	cmp.Rebalancer.NodesBefore = nodes
	if doc := render(t, "x", cmp); !bytes.Contains(doc, []byte("CPU used, % of allocatable")) {
		t.Error("the page does not plot the usage")
	}
}

// A large cluster still gives a file small enough to mail around.
func TestWriteLargeCluster(t *testing.T) {
	c := &result.Comparison{
		Rebalancer: fakeResult("rebalancer", []int{500, 300, 100, 20, 0}, 5000),
		Baseline:   fakeResult("upstream", []int{400, 400, 300, 200, 100, 50, 20, 10, 5, 1}, 5000),
	}
	doc := render(t, "large", c)
	checkMarks(t, doc, true, c)
	if len(doc) > 3<<20 {
		t.Errorf("%d nodes give %d bytes, want at most 3 MiB", 5000, len(doc))
	}
}

// TestBrowser opens the page in headless Chromium: the DOM it builds must
// hold every chart's marks, and its screenshot must show them in their
// colors. 1,500 nodes make the utilization bars narrower than a pixel.
func TestBrowser(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("REBALANCER_REQUIRE_CHROMIUM") == "1" {
			t.Fatalf("chromium not found and REBALANCER_REQUIRE_CHROMIUM=1: %v", err)
		}
		t.Skip("chromium not found in PATH; install it (apt-get install chromium) or set REBALANCER_REQUIRE_CHROMIUM=1 to fail instead of skipping")
	}
	c := &result.Comparison{
		Rebalancer: fakeResult("rebalancer", []int{200, 100, 0}, 1500),
		Baseline:   fakeResult("upstream", []int{150, 150, 50, 10}, 1500),
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	if err := os.WriteFile(page, render(t, "Browser test", c), 0o644); err != nil {
		t.Fatal(err)
	}
	chromium := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		args = append([]string{
			"--headless", "--no-sandbox", "--disable-gpu",
			// Containers often have a small /dev/shm.
			"--disable-dev-shm-usage",
			"--user-data-dir=" + t.TempDir(),
		}, append(args, "file://"+page)...)
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("chromium %v: %v\n%s", args, err, stderr.Bytes())
		}
		return stdout.Bytes()
	}

	dom := chromium("--dump-dom")
	checkMarks(t, dom, false, c)

	shot := filepath.Join(dir, "shot.png")
	chromium("--screenshot="+shot, "--window-size=1200,2000", "--hide-scrollbars")
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1200 || b.Dy() != 2000 {
		t.Errorf("screenshot is %v, want 1200x2000", b)
	}
	// Each color of report.html.tmpl's CSS fills only marks: its presence
	// means the marks were painted, and the charts are not blank.
	for name, rgb := range map[string][3]uint8{
		"rebalancer": {0x25, 0x63, 0xeb},
		"baseline":   {0xea, 0x58, 0x0c},
		"cpu":        {0x0d, 0x94, 0x88},
		"mem":        {0x7c, 0x3a, 0xed},
	} {
		if n := countColor(img, rgb); n < 100 {
			t.Errorf("the screenshot has %d pixels of %s's color %x, want at least 100", n, name, rgb)
		}
	}
}

// countColor counts the pixels within a small distance of rgb, which
// leaves room for color management and antialiasing.
func countColor(img image.Image, rgb [3]uint8) int {
	near := func(a uint32, b uint8) bool {
		d := int(a>>8) - int(b)
		return d >= -6 && d <= 6
	}
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near(r, rgb[0]) && near(g, rgb[1]) && near(bl, rgb[2]) {
				n++
			}
		}
	}
	return n
}

// TestProvenanceAndRounds: the page names the build, the day and the
// command, lists each round with why it did not move more, and says when
// the simulation was interrupted.
func TestProvenanceAndRounds(t *testing.T) {
	c := sample()
	c.Rebalancer.Rounds[1].Skipped = map[string]int{"limit": 7, "no-fit": 2, "pdb": 2, "cooldown": 1}
	c.Rebalancer.Interrupted = true
	doc := string(render(t, "x", c))
	for _, want := range []string{
		"rebalancer v0.1.0; simulated 2026-11-28T12:00:00Z", "<code>rebalancer simulate --snapshot s.yaml</code>",
		`<table class="summary" data-rounds="rebalancer">`, "<td>limit 7, no-fit 2, pdb 2</td>",
		"rebalancer: interrupted after round 3",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(doc, "upstream: interrupted") {
		t.Error("the baseline, which finished, is marked interrupted")
	}
}
