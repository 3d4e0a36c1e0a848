package report

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestWriteTimeSeries(t *testing.T) {
	charts := []TimeChart{
		{Key: "nodes", Title: "Nodes in use", Integer: true, Series: []TimeSeries{
			{Name: "in use", Points: []TimePoint{{0, 40}, {time.Minute, 30}, {2 * time.Minute, 20}}},
			{Name: "lower bound <b>", Dashed: true, Points: []TimePoint{{0, 18}, {time.Minute, 18}, {2 * time.Minute, 19}}},
		}},
		{Key: "rss", Title: "RSS", Unit: "MiB", Series: []TimeSeries{
			{Name: "rebalancer", Points: []TimePoint{{0, 80.5}, {2 * time.Minute, 81.25}}},
		}},
	}
	var buf bytes.Buffer
	if err := WriteTimeSeries(&buf, Meta{Title: "Soak", Version: "v0", Date: time.Unix(0, 0), Command: "soak"}, "a note", charts); err != nil {
		t.Fatal(err)
	}
	doc := buf.String()
	for _, want := range []string{`data-chart="nodes"`, `data-chart="rss"`, "RSS (MiB)", "a note", "lower bound &lt;b&gt;", "in use at 1m0s: 30", "rebalancer at 2m0s: 81.2"} {
		if !strings.Contains(doc, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if n := strings.Count(doc, "<circle"); n != 8 {
		t.Errorf("%d points drawn, want 8", n)
	}
	if n := strings.Count(doc, `class="line s1 dashed"`); n != 1 {
		t.Errorf("%d dashed lines, want 1", n)
	}
	// Time runs left to right and larger values sit higher: the first
	// line's points go right and down (40, 30, 20 nodes).
	m := regexp.MustCompile(`class="line s0" d="M([\d.]+),([\d.]+)L([\d.]+),([\d.]+)L([\d.]+),([\d.]+)"`).FindStringSubmatch(doc)
	if m == nil {
		t.Fatalf("no three-point path for the first series:\n%s", doc)
	}
	f := func(i int) float64 { v, _ := strconv.ParseFloat(m[i], 64); return v }
	if !(f(1) < f(3) && f(3) < f(5) && f(2) < f(4) && f(4) < f(6)) || m[1] != "56" || m[5] != "984" {
		t.Errorf("path %s: want x from 56 to 984, y growing as the values fall", m[0])
	}
	if !strings.Contains(doc, `text-anchor="middle">2m</text>`) {
		t.Error("no 2m tick on the time axis")
	}
	// The report's frame (frame.html.tmpl): its style, and axes named.
	if !strings.Contains(doc, `.axis { stroke: #9ca3af; }`) || strings.Count(doc, `text-anchor="end">time</text>`) != 2 {
		t.Error("the charts lack the report's frame: its style, or a time axis named on each chart")
	}
}

func TestWriteTimeSeriesShortRunTicksInSeconds(t *testing.T) {
	c := newTimeLineChart(TimeChart{Series: []TimeSeries{{Name: "x", Points: []TimePoint{{0, 1}, {90 * time.Second, 2}}}}})
	if len(c.XTicks) < 2 || c.XTicks[1].Label != "9s" {
		t.Errorf("ticks %+v, want every 9s", c.XTicks)
	}
}

func TestWriteTimeSeriesNoCharts(t *testing.T) {
	if err := WriteTimeSeries(&bytes.Buffer{}, Meta{}, "", nil); err == nil {
		t.Error("no error for a page without charts")
	}
}

func TestFractionalTicksLabelledShort(t *testing.T) {
	_, ticks := niceScale(0, 1, 5, 0, 100, false)
	var labels []string
	for _, tk := range ticks {
		labels = append(labels, tk.Label)
	}
	if got := strings.Join(labels, " "); got != "0 0.2 0.4 0.6 0.8 1" {
		t.Errorf("labels %q", got)
	}
}
