// Package report renders a simulation comparison as one self-contained HTML
// file. The charts are SVG drawn here, on the server side, and the CSS is
// inline: the file has no script and fetches nothing, so it opens the same
// on a machine without network access, where clusters often are.
package report

import (
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"time"

	"github.com/rebalancer-dev/rebalancer/pkg/rounds/result"
)

//go:embed report.html.tmpl
var pageTemplate string

// frameTemplate is what the report and the time series pages share: their
// style and axes.
//
//go:embed frame.html.tmpl
var frameTemplate string

var tmpl = template.Must(template.Must(template.New("report").Parse(frameTemplate)).Parse(pageTemplate))

// Meta says what a report shows and where it came from, so that a page
// read weeks later can be reproduced: the inputs, the build, the day and
// the command.
type Meta struct {
	Title   string
	Version string // rebalancer's version line
	Date    time.Time
	Command string // the command line, as typed
}

// Generated is the report's date as the page prints it.
func (m Meta) Generated() string { return m.Date.UTC().Format(time.RFC3339) }

// Write renders c as an HTML page. c.Baseline may be nil; the page then
// shows rebalancer alone.
func Write(w io.Writer, m Meta, c *result.Comparison) error {
	if c == nil || c.Rebalancer == nil {
		return errors.New("report: the comparison has no rebalancer result")
	}
	return tmpl.Execute(w, newPage(m, c))
}

// series is one strategy's result with the names the page shows it under.
type series struct {
	// Role is "rebalancer" or "baseline": the CSS class that colors the
	// strategy, and the suffix of its data-chart names. It does not depend
	// on Result.Strategy, so tests and readers can rely on it.
	Role string
	// Name is the strategy as the simulation named it.
	Name string
	*result.Result
}

// LastRound is the number of the last round the strategy finished.
func (s series) LastRound() int {
	if len(s.Rounds) == 0 {
		return 0
	}
	return s.Rounds[len(s.Rounds)-1].Round
}

func seriesOf(c *result.Comparison) []series {
	ss := []series{{Role: "rebalancer", Result: c.Rebalancer}}
	if c.Baseline != nil {
		ss = append(ss, series{Role: "baseline", Result: c.Baseline})
	}
	for i := range ss {
		ss[i].Name = ss[i].Strategy
		if ss[i].Name == "" {
			ss[i].Name = ss[i].Role
		}
	}
	return ss
}

type page struct {
	Meta
	Series     []series
	Summary    []summaryRow
	NodesInUse lineChart
	Evictions  barChart
	// Util holds, per strategy in Series order, its before and after charts.
	Util []utilChart
}

func newPage(m Meta, c *result.Comparison) page {
	ss := seriesOf(c)
	p := page{
		Meta:       m,
		Series:     ss,
		NodesInUse: nodesInUseChart(ss),
		Evictions:  evictionsChart(ss),
	}
	for _, s := range ss {
		p.Summary = append(p.Summary, summarize(s))
		p.Util = append(p.Util,
			newUtilChart("util-before-"+s.Role, s.Name+": before the first round", s.NodesBefore),
			newUtilChart("util-after-"+s.Role, s.Name+": after the last round", s.NodesAfter))
	}
	return p
}

// summaryRow is one strategy's line in the summary table. Cells that need
// a round are strings, "–" when the strategy has no rounds.
type summaryRow struct {
	Role, Name                  string
	Evictions, PingPong, Placed int
	NodesFirst                  string
	NodesLast                   string
	LowerBound                  string
	ConvergedAt                 string
	Unschedulable               string
}

func summarize(s series) summaryRow {
	row := summaryRow{Role: s.Role, Name: s.Name, NodesFirst: "–", NodesLast: "–", LowerBound: "–", Unschedulable: "–", ConvergedAt: "not converged"}
	for _, r := range s.Rounds {
		row.Evictions += r.Evictions
		row.PingPong += r.PingPong
		row.Placed += r.Placed
	}
	if s.ConvergedAt > 0 {
		row.ConvergedAt = strconv.Itoa(s.ConvergedAt)
	}
	if len(s.Rounds) > 0 {
		first, last := s.Rounds[0], s.Rounds[len(s.Rounds)-1]
		row.NodesFirst = strconv.Itoa(first.NodesInUse)
		row.NodesLast = strconv.Itoa(last.NodesInUse) + " (round " + strconv.Itoa(last.Round) + ")"
		// The snapshot's bound: later rounds lower it when pods are left
		// without a node, which is no progress.
		row.LowerBound = fmt.Sprintf("%d (by node class %d)", first.LowerBound, first.ClassLowerBound)
		row.Unschedulable = strconv.Itoa(last.Unschedulable)
	}
	return row
}
