package daemon

import (
	"strings"
	"testing"
	"time"
)

// FuzzParseSchedule checks that no --interval/--schedule pair panics
// ParseSchedule, that an error is a non-empty message naming the flag, and
// that a schedule that parses is non-nil and can be asked for its next run.
func FuzzParseSchedule(f *testing.F) {
	for _, spec := range []string{
		"*/15 * * * *", "@hourly", "@every 90s", "CRON_TZ=Europe/Berlin 0 3 * * *", "TZ=UTC 0 22 * * 1-5",
		"61 * * * *", "0 25 * * *", "0 0 * 13 *", "0 0 * * mon-xyz", "* * *", "@sometimes",
		"CRON_TZ=Nowhere/Land 0 3 * * *", "0 0 31 2 *", "",
	} {
		f.Add(int64(0), spec)
	}
	f.Add(int64(10*time.Minute), "")
	f.Add(int64(time.Minute), "@hourly")
	f.Add(int64(-time.Minute), "")

	at := time.Date(2026, 11, 22, 10, 7, 30, 0, time.UTC)
	f.Fuzz(func(t *testing.T, interval int64, spec string) {
		s, err := ParseSchedule(time.Duration(interval), spec)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "--") && !strings.HasPrefix(msg, "give --") {
				t.Fatalf("error does not name a flag: %q", msg)
			}
			return
		}
		if s == nil {
			t.Fatal("ParseSchedule returned neither a schedule nor an error")
		}
		// A schedule that never fires again returns the zero time; any
		// other next run is after at.
		if next := s.Next(at); !next.IsZero() && !next.After(at) {
			t.Fatalf("next run after %s is %s", at, next)
		}
	})
}

// FuzzParseWindow checks that no --window value panics ParseWindow, that an
// error is a non-empty line naming the flag, and that a window that parses
// prints as its input, contains its start minute and not its end minute.
func FuzzParseWindow(f *testing.F) {
	for _, s := range []string{
		"22:00-06:00", "09:30-17:00", "00:00-23:59", " 22:00 - 06:00 ", "",
		"22:00", "25:00-06:00", "22:00-6", "10:00-10:00", "ab-cd", "22:00-06:00-07:00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, err := ParseWindow(s)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "--window ") || strings.Contains(msg, "\n") {
				t.Fatalf("error is not one line naming --window: %q", msg)
			}
			return
		}
		if s == "" {
			if w != nil {
				t.Fatalf("ParseWindow(\"\") = %v, want nil (always open)", w)
			}
			return
		}
		if w == nil {
			t.Fatal("ParseWindow returned neither a window nor an error")
		}
		if w.String() != s {
			t.Fatalf("String() = %q, want the input %q", w.String(), s)
		}
		day := func(m int) time.Time { return time.Date(2026, 11, 22, m/60, m%60, 0, 0, time.UTC) }
		if !w.Contains(day(w.start)) || w.Contains(day(w.end)) {
			t.Fatalf("%s: contains start %v, end %v; want true, false", s, w.Contains(day(w.start)), w.Contains(day(w.end)))
		}
	})
}
