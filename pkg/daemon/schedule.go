package daemon

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// ParseSchedule returns when cycles run: every interval, or on a cron spec
// (robfig/cron's standard five fields, descriptors such as @hourly, and a
// CRON_TZ= prefix). Exactly one must be given. An invalid spec is an error
// naming the field.
func ParseSchedule(interval time.Duration, spec string) (cron.Schedule, error) {
	switch {
	case interval != 0 && spec != "":
		return nil, errors.New("give --interval or --schedule, not both")
	case interval < 0:
		return nil, fmt.Errorf("--interval %s: must be positive", interval)
	case interval > 0:
		return cron.Every(interval), nil
	case spec == "":
		return nil, errors.New("give --interval or --schedule (or --once)")
	}
	// robfig/cron v3.0.1 panics on a time zone with nothing after it.
	if (strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=")) && !strings.Contains(spec, " ") {
		return nil, fmt.Errorf("--schedule %q: want a space and the schedule after the time zone, as in CRON_TZ=Europe/Berlin 0 3 * * *", spec)
	}
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("--schedule %q: %s", spec, badField(spec, err))
	}
	return sched, nil
}

var fieldNames = []string{"minute", "hour", "day of month", "month", "day of week"}

// badField names the field of a five-field spec that does not parse, as
// robfig/cron's messages do not.
func badField(spec string, err error) string {
	body := spec
	prefix := ""
	if strings.HasPrefix(body, "CRON_TZ=") || strings.HasPrefix(body, "TZ=") {
		if i := strings.IndexByte(body, ' '); i > 0 {
			prefix, body = body[:i+1], strings.TrimSpace(body[i+1:])
		}
	}
	fields := strings.Fields(body)
	if len(fields) != len(fieldNames) || strings.HasPrefix(body, "@") {
		return err.Error()
	}
	for i, f := range fields {
		probe := make([]string, len(fields))
		for j := range probe {
			probe[j] = "*"
		}
		probe[i] = f
		if _, ferr := cron.ParseStandard(prefix + strings.Join(probe, " ")); ferr != nil {
			return fmt.Sprintf("%s field %q: %v", fieldNames[i], f, ferr)
		}
	}
	return err.Error()
}

// Window is a daily time-of-day range in which evictions may happen, such
// as 22:00-06:00 (it may cross midnight).
type Window struct {
	start, end int // minutes after midnight; end exclusive
	text       string
}

// ParseWindow parses "HH:MM-HH:MM"; "" means no window (always open).
func ParseWindow(s string) (*Window, error) {
	if s == "" {
		return nil, nil
	}
	from, to, ok := strings.Cut(s, "-")
	if !ok {
		return nil, fmt.Errorf("--window %q: want HH:MM-HH:MM", s)
	}
	start, err := timeOfDay(from)
	if err != nil {
		return nil, fmt.Errorf("--window %q: start: %w", s, err)
	}
	end, err := timeOfDay(to)
	if err != nil {
		return nil, fmt.Errorf("--window %q: end: %w", s, err)
	}
	if start == end {
		return nil, fmt.Errorf("--window %q: start and end are equal; leave --window out to allow any time", s)
	}
	return &Window{start: start, end: end, text: s}, nil
}

func timeOfDay(s string) (int, error) {
	t, err := time.Parse("15:04", strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a time of day HH:MM", s)
	}
	return t.Hour()*60 + t.Minute(), nil
}

// Contains says whether t (in its own location) is inside the window. A
// nil window contains every time.
func (w *Window) Contains(t time.Time) bool {
	if w == nil {
		return true
	}
	m := t.Hour()*60 + t.Minute()
	if w.start < w.end {
		return m >= w.start && m < w.end
	}
	return m >= w.start || m < w.end // crosses midnight
}

func (w *Window) String() string {
	if w == nil {
		return "always"
	}
	return w.text
}
