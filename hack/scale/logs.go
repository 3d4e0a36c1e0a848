package main

import (
	"strconv"
	"strings"
	"time"
)

// The lines rebalancer logs (klog's text format) as a plan goes on
// (pkg/session, pkg/cycle).
const (
	msgReading  = "Reading the cluster"     // the informers start
	msgBuilding = "Building the simulation" // synced: the snapshot is read
	msgPlanning = "Planning"                // the simulation is built
	msgPlanned  = "Planned"                 // the plan is made
	msgCycle    = "Cycle done"              // run: the plan carried out
)

// Phases split a command's wall time by its log lines; a phase whose lines
// are missing is 0.
type Phases struct {
	// StartSeconds: to the first line (process start, flags, client).
	StartSeconds float64 `json:"startSeconds"`
	// ReadSeconds: the informers' lists until synced, and the usage window
	// when the policy reads usage.
	ReadSeconds       float64 `json:"readSeconds"`
	SimulationSeconds float64 `json:"simulationSeconds"`
	PlanSeconds       float64 `json:"planSeconds"`
	// FirstPlanSeconds: from the start of the process to the plan made.
	FirstPlanSeconds float64 `json:"firstPlanSeconds"`
	// ExecuteSeconds: run only, from the plan to the cycle's end
	// (evictions, waiting for the replacements of drained nodes).
	ExecuteSeconds float64 `json:"executeSeconds,omitempty"`
}

// klogLine is one line of klog's text format:
// `I1129 04:03:10.123456   12345 file.go:141] "Message" key=value ...`.
type klogLine struct {
	At  time.Time
	Msg string
	KV  string
}

// parseKlog reads a klog text line; the date has no year, so start's is
// used (and its location), a year back when that puts it after start by
// more than a day.
func parseKlog(line string, start time.Time) (klogLine, bool) {
	if len(line) < 22 || !strings.ContainsRune("IWEF", rune(line[0])) {
		return klogLine{}, false
	}
	at, err := time.ParseInLocation("0102 15:04:05.000000", line[1:21], start.Location())
	if err != nil {
		return klogLine{}, false
	}
	at = at.AddDate(start.Year(), 0, 0)
	if at.Sub(start) > 24*time.Hour {
		at = at.AddDate(-1, 0, 0)
	}
	_, rest, ok := strings.Cut(line, "] ")
	if !ok {
		return klogLine{}, false
	}
	msg, kv := rest, ""
	if strings.HasPrefix(rest, `"`) {
		if end := strings.Index(rest[1:], `"`); end >= 0 {
			msg, kv = rest[1:end+1], strings.TrimSpace(rest[end+2:])
		}
	}
	return klogLine{At: at, Msg: msg, KV: kv}, true
}

// value is the value of key in a klog line's key=value pairs ("" when it
// has none); quoted values keep their quotes.
func (l klogLine) value(key string) string {
	for _, f := range strings.Fields(l.KV) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

// phasesOf splits a command's log by the first line of each phase, and
// reads the moves planned and the pods evicted (-1 when not logged).
func phasesOf(log string, start time.Time) (p Phases, evicted, moves int) {
	first := map[string]klogLine{}
	for _, line := range strings.Split(log, "\n") {
		l, ok := parseKlog(line, start)
		if !ok {
			continue
		}
		if _, seen := first[l.Msg]; !seen {
			first[l.Msg] = l
		}
	}
	between := func(from time.Time, to string) float64 {
		l, ok := first[to]
		if !ok || from.IsZero() {
			return 0
		}
		return seconds(l.At.Sub(from))
	}
	at := func(msg string) time.Time { return first[msg].At }
	p.StartSeconds = between(start, msgReading)
	p.ReadSeconds = between(at(msgReading), msgBuilding)
	p.SimulationSeconds = between(at(msgBuilding), msgPlanning)
	p.PlanSeconds = between(at(msgPlanning), msgPlanned)
	p.FirstPlanSeconds = between(start, msgPlanned)
	p.ExecuteSeconds = between(at(msgPlanned), msgCycle)
	evicted, moves = -1, -1
	if l, ok := first[msgCycle]; ok {
		evicted = atoi(l.value("evicted"))
	}
	if l, ok := first[msgPlanned]; ok {
		moves = atoi(l.value("moves"))
	}
	return p, evicted, moves
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}
