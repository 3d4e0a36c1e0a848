package report

import (
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"time"
)

//go:embed timeseries.html.tmpl
var timeSeriesTemplate string

var timeSeriesTmpl = template.Must(template.Must(template.New("timeseries").Parse(frameTemplate)).Parse(timeSeriesTemplate))

// TimeChart is one chart of values over time, e.g. a soak run's samples:
// one line per series, drawn with the same frame, scales and style as the
// simulation report's.
type TimeChart struct {
	Key   string // the data-chart name, for tests and readers
	Title string
	Unit  string // the y axis' unit, shown with the title
	// Integer: counts, whose axis never gets a fractional step.
	Integer bool
	Series  []TimeSeries
}

// TimeSeries is one line of a TimeChart. A Dashed line is a reference,
// such as a lower bound.
type TimeSeries struct {
	Name   string
	Dashed bool
	Points []TimePoint
}

// TimePoint is a value At a time since the start of the run.
type TimePoint struct {
	At    time.Duration
	Value float64
}

// WriteTimeSeries renders charts as one self-contained HTML page, titled
// by m, with note under the title (plain text).
func WriteTimeSeries(w io.Writer, m Meta, note string, charts []TimeChart) error {
	if len(charts) == 0 {
		return errors.New("report: no time series to chart")
	}
	p := timePage{Meta: m, Note: note}
	for _, c := range charts {
		p.Charts = append(p.Charts, newTimeLineChart(c))
	}
	return timeSeriesTmpl.Execute(w, p)
}

type timePage struct {
	Meta
	Note   string
	Charts []timeLineChart
}

type timeLineChart struct {
	frame
	Key, Title, Unit string
	Lines            []timeLine
}

type timeLine struct {
	Name   string
	Class  string // the color, s0 to s5, and dashed for a reference line
	D      string
	Points []point
}

// seriesColors is how many colors the page's CSS defines (s0 to s5).
const seriesColors = 6

// newTimeLineChart scales the chart: time across from 0 to the last point,
// values up from a margin below the lowest.
func newTimeLineChart(c TimeChart) timeLineChart {
	out := timeLineChart{frame: roundFrame(), Key: c.Key, Title: c.Title, Unit: c.Unit}
	out.XLabel = "time"
	var last time.Duration
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range c.Series {
		for _, p := range s.Points {
			last = max(last, p.At)
			lo, hi = min(lo, p.Value), max(hi, p.Value)
		}
	}
	if lo > hi {
		lo, hi = 0, 1
	}
	ys, yTicks := niceScale(max(0, lo-(hi-lo)/20), hi, 5, out.Top, out.Bottom, c.Integer)
	out.YTicks = yTicks
	span := max(last, time.Second)
	x := func(at time.Duration) float64 { return px(out.Left + float64(at)/float64(span)*out.PlotW()) }
	// Ticks in whole minutes (seconds for runs under two minutes), about
	// ten of them.
	unit := time.Minute
	if span < 2*time.Minute {
		unit = time.Second
	}
	step := max(unit, (span/10+unit-1)/unit*unit)
	for at := time.Duration(0); at <= span; at += step {
		label := fmt.Sprintf("%dm", at/time.Minute)
		if unit == time.Second {
			label = fmt.Sprintf("%ds", at/time.Second)
		}
		out.XTicks = append(out.XTicks, tick{At: x(at), Label: label})
	}
	for i, s := range c.Series {
		l := timeLine{Name: s.Name, Class: fmt.Sprintf("s%d", i%seriesColors)}
		if s.Dashed {
			l.Class += " dashed"
		}
		var d strings.Builder
		for j, p := range s.Points {
			px, py := x(p.At), px(ys.y(p.Value))
			cmd := "L"
			if j == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%v,%v", cmd, px, py)
			l.Points = append(l.Points, point{X: px, Y: py,
				Title: fmt.Sprintf("%s at %s: %s", s.Name, p.At.Round(time.Second), formatValue(p.Value))})
		}
		l.D = d.String()
		out.Lines = append(out.Lines, l)
	}
	return out
}

// formatValue prints whole numbers without a fraction and others with
// three significant digits.
func formatValue(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.3g", v)
}
