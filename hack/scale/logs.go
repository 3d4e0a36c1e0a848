package main

import (
	"encoding/json"
	"math"
	"strings"
	"time"
)

// The lines rebalancer logs as a plan goes on (pkg/session, pkg/cycle); the
// commands are run with --logging-format=json.
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

// logLine is one line of the JSON log format (--logging-format=json), whose
// ts is milliseconds since the epoch:
// `{"ts":1764388990123.456,"caller":"cycle/cycle.go:167","msg":"Planned","v":0,"moves":145}`.
type logLine struct {
	At     time.Time
	Msg    string
	Fields map[string]any
}

// parseLine reads a JSON log line; ok is false for anything else.
func parseLine(line string) (l logLine, ok bool) {
	if !strings.HasPrefix(line, "{") {
		return l, false
	}
	if err := json.Unmarshal([]byte(line), &l.Fields); err != nil {
		return l, false
	}
	ts, ok1 := l.Fields["ts"].(float64)
	msg, ok2 := l.Fields["msg"].(string)
	if !ok1 || !ok2 {
		return l, false
	}
	l.At, l.Msg = time.UnixMicro(int64(math.Round(ts*1000))), msg
	return l, true
}

// count is the integer value of key, -1 when the line has none.
func (l logLine) count(key string) int {
	if v, ok := l.Fields[key].(float64); ok && v == math.Trunc(v) {
		return int(v)
	}
	return -1
}

// phasesOf splits a command's log by the first line of each phase, and
// reads the moves planned and the pods evicted (-1 when not logged).
func phasesOf(log string, start time.Time) (p Phases, evicted, moves int) {
	first := map[string]logLine{}
	for _, line := range strings.Split(log, "\n") {
		l, ok := parseLine(line)
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
		evicted = l.count("evicted")
	}
	if l, ok := first[msgPlanned]; ok {
		moves = l.count("moves")
	}
	return p, evicted, moves
}
