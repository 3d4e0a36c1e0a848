package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/rebalancer-dev/rebalancer/pkg/rounds/result"
)

// frame is a chart's drawing box in SVG user units and its axis ticks.
type frame struct {
	W, H                     float64
	Left, Right, Top, Bottom float64
	XTicks, YTicks           []tick
	XLabel                   string // the x axis' name, at its right end; "": none
}

// PlotW is the width of the plot area, between the axes' left and right ends.
func (f frame) PlotW() float64 { return f.Right - f.Left }

type tick struct {
	At    float64 // position along the axis, in user units
	Label string
}

// The per-round charts share one frame size and one x scale, so that a
// round sits at the same x in both.
const roundW, roundH = 1000, 300

func roundFrame() frame {
	return frame{W: roundW, H: roundH, Left: 56, Right: roundW - 16, Top: 12, Bottom: roundH - 36, XLabel: "round"}
}

// px rounds a coordinate to a tenth of a unit, which is below what a screen
// shows and keeps the file short.
func px(v float64) float64 { return math.Round(v*10) / 10 }

// roundScale places rounds in equal bands across a frame; a round's marks
// are centered in its band.
type roundScale struct {
	first      int
	left, band float64
}

func newRoundScale(ss []series, f frame) (roundScale, []tick) {
	first, last := math.MaxInt, math.MinInt
	for _, s := range ss {
		for _, r := range s.Rounds {
			first, last = min(first, r.Round), max(last, r.Round)
		}
	}
	if first > last {
		first, last = 0, 0
	}
	n := last - first + 1
	sc := roundScale{first: first, left: f.Left, band: f.PlotW() / float64(n)}
	// About 20 labels at most, so they do not run into each other.
	every := (n + 19) / 20
	var ticks []tick
	for r := first; r <= last; r += every {
		ticks = append(ticks, tick{At: px(sc.center(r)), Label: strconv.Itoa(r)})
	}
	return sc, ticks
}

func (sc roundScale) center(round int) float64 {
	return sc.left + (float64(round-sc.first)+0.5)*sc.band
}

// linear maps [lo, hi] onto the frame's height, hi at the top.
type linear struct{ lo, hi, top, bottom float64 }

func (l linear) y(v float64) float64 {
	return l.bottom - (v-l.lo)/(l.hi-l.lo)*(l.bottom-l.top)
}

// niceScale widens [lo, hi] to multiples of a 1, 2 or 5 step giving about
// n ticks, and returns the scale with those ticks. Counts never get a
// fractional step.
func niceScale(lo, hi float64, n int, top, bottom float64, integer bool) (linear, []tick) {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	if integer {
		step = max(step, 1)
	}
	l := linear{lo: math.Floor(lo/step) * step, hi: math.Ceil(hi/step) * step, top: top, bottom: bottom}
	var ticks []tick
	for i := 0; ; i++ {
		v := l.lo + float64(i)*step
		if v > l.hi+step/2 {
			break
		}
		// Twelve digits: a multiple of a fractional step, such as 3 × 0.2,
		// is labelled 0.6, not with its float error.
		ticks = append(ticks, tick{At: px(l.y(v)), Label: strconv.FormatFloat(v, 'g', 12, 64)})
	}
	return l, ticks
}

type lineChart struct {
	frame
	Lines []line
	// LowerBound is the path of a reference line at the snapshot's lower
	// bound, as the summary shows it; empty without rounds.
	LowerBound string
}

type line struct {
	Role, Name string
	D          string // the SVG path through Points
	Points     []point
}

type point struct {
	X, Y  float64
	Title string
}

func nodesInUseChart(ss []series) lineChart {
	c := lineChart{frame: roundFrame()}
	xs, xTicks := newRoundScale(ss, c.frame)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, r := range s.Rounds {
			lo = min(lo, float64(r.NodesInUse), float64(r.ClassLowerBound))
			hi = max(hi, float64(r.NodesInUse), float64(r.ClassLowerBound))
		}
	}
	if lo > hi {
		lo, hi = 0, 1
	}
	// A margin below keeps the lowest line, often the lower bound, off
	// the axis.
	ys, yTicks := niceScale(max(0, lo-(hi-lo)/20), hi, 5, c.Top, c.Bottom, true)
	c.XTicks, c.YTicks = xTicks, yTicks

	for _, s := range ss {
		l := line{Role: s.Role, Name: s.Name}
		var d strings.Builder
		for i, r := range s.Rounds {
			x, y := px(xs.center(r.Round)), px(ys.y(float64(r.NodesInUse)))
			cmd := "L"
			if i == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%v,%v", cmd, x, y)
			l.Points = append(l.Points, point{X: x, Y: y,
				Title: fmt.Sprintf("%s, round %d: %d nodes in use (lower bound %d, by node class %d)", s.Name, r.Round, r.NodesInUse, r.LowerBound, r.ClassLowerBound)})
		}
		l.D = d.String()
		c.Lines = append(c.Lines, l)
	}
	if rounds := ss[0].Rounds; len(rounds) > 0 {
		c.LowerBound = fmt.Sprintf("M%v,%vH%v", c.Left, px(ys.y(float64(rounds[0].ClassLowerBound))), c.Right)
	}
	return c
}

type barChart struct {
	frame
	Bars []bar
}

type bar struct {
	Role       string
	X, Y, W, H float64
	Title      string
}

func evictionsChart(ss []series) barChart {
	c := barChart{frame: roundFrame()}
	xs, xTicks := newRoundScale(ss, c.frame)
	most := 0
	for _, s := range ss {
		for _, r := range s.Rounds {
			most = max(most, r.Evictions)
		}
	}
	ys, yTicks := niceScale(0, float64(most), 5, c.Top, c.Bottom, true)
	c.XTicks, c.YTicks = xTicks, yTicks

	// The strategies' bars stand side by side in the middle 80% of a band.
	group := xs.band * 0.8
	w := group / float64(len(ss))
	for i, s := range ss {
		for _, r := range s.Rounds {
			y := ys.y(float64(r.Evictions))
			c.Bars = append(c.Bars, bar{
				Role:  s.Role,
				X:     px(xs.center(r.Round) - group/2 + float64(i)*w),
				Y:     px(y),
				W:     px(w),
				H:     px(c.Bottom - y),
				Title: fmt.Sprintf("%s, round %d: %d evictions, %d ping-pong", s.Name, r.Round, r.Evictions, r.PingPong),
			})
		}
	}
	return c
}

// utilChart shows one node set's requested CPU and memory, one thin bar per
// node sorted highest first: with thousands of nodes the bars merge into the
// shape of the distribution, with no per-node label to clutter it.
type utilChart struct {
	frame
	Key    string // the data-chart name
	Title  string
	Nodes  int
	Panels []utilPanel
}

// utilPanel is one resource's bars. They are drawn in a nested SVG whose
// user units are nodes across and percent up, so a bar's coordinates are
// its index and its value, short to write for thousands of nodes.
type utilPanel struct {
	Class, Label string
	Top, Height  float64 // the panel's box in the chart's units
	ViewW, Max   float64 // the nested SVG's width in nodes and height in percent
	Ticks        []tick
	Bars         []utilBar
}

type utilBar struct {
	X    int
	Y, H float64
}

const utilW, utilH = 560, 250

func deref(v *float64) float64 {
	if v == nil {
		return 0
	}
	return *v
}

func newUtilChart(key, title string, nodes []result.NodeUtil) utilChart {
	const gap, height = 24, 88
	resources := []struct {
		class, label string
		value        func(result.NodeUtil) float64
	}{
		{"cpu", "CPU requested, % of allocatable", func(n result.NodeUtil) float64 { return n.CPU }},
		{"mem", "Memory requested, % of allocatable", func(n result.NodeUtil) float64 { return n.Memory }},
	}
	if slices.ContainsFunc(nodes, func(n result.NodeUtil) bool { return n.UsedCPU != nil }) {
		// The snapshot has the usage: what the nodes use, beside what they reserve.
		resources = append(resources, []struct {
			class, label string
			value        func(result.NodeUtil) float64
		}{
			{"cpu used", "CPU used, % of allocatable", func(n result.NodeUtil) float64 { return deref(n.UsedCPU) }},
			{"mem used", "Memory used, % of allocatable", func(n result.NodeUtil) float64 { return deref(n.UsedMemory) }},
		}...)
	}
	h := utilH + float64(len(resources)-2)*(height+gap)
	c := utilChart{
		frame: frame{W: utilW, H: h, Left: 44, Right: utilW - 8, Top: 24, Bottom: h - 26},
		Key:   key, Title: title, Nodes: len(nodes),
	}
	for i, res := range resources {
		vs := make([]float64, len(nodes))
		for j, n := range nodes {
			// Tenths of a percent are below what a bar shows.
			vs[j] = max(px(res.value(n)), 0)
		}
		slices.Sort(vs)
		slices.Reverse(vs)
		p := utilPanel{
			Class: res.class, Label: res.label,
			Top: c.Top + float64(i)*(height+gap), Height: height,
			ViewW: float64(max(len(nodes), 1)),
		}
		// Requests above allocatable should not happen; if they do, the
		// scale grows to show them rather than clip them.
		top := 100.0
		if len(vs) > 0 {
			top = max(top, vs[0])
		}
		ys, ticks := niceScale(0, top, 2, p.Top, p.Top+p.Height, false)
		p.Ticks, p.Max = ticks, ys.hi
		for j, v := range vs {
			p.Bars = append(p.Bars, utilBar{X: j, Y: px(p.Max - v), H: v})
		}
		c.Panels = append(c.Panels, p)
	}
	return c
}
