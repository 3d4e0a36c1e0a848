package daemon

import (
	"strings"
	"testing"
	"time"
)

func TestParseSchedule(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 7, 30, 0, time.UTC)
	cases := []struct {
		interval time.Duration
		spec     string
		next     time.Time
		wantErr  string
	}{
		{interval: 10 * time.Minute, next: at.Add(10 * time.Minute).Truncate(time.Second)},
		{spec: "*/15 * * * *", next: time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC)},
		{spec: "@hourly", next: time.Date(2026, 11, 22, 11, 0, 0, 0, time.UTC)},
		{spec: "CRON_TZ=Europe/Berlin 0 3 * * *", next: time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC)},
		{spec: "61 * * * *", wantErr: `minute field "61"`},
		{spec: "0 25 * * *", wantErr: `hour field "25"`},
		{spec: "0 0 * 13 *", wantErr: `month field "13"`},
		{spec: "0 0 * * mon-xyz", wantErr: `day of week field "mon-xyz"`},
		{spec: "* * *", wantErr: "--schedule"},
		{spec: "@sometimes", wantErr: "--schedule"},
		{interval: time.Minute, spec: "@hourly", wantErr: "not both"},
		{interval: -time.Minute, wantErr: "--interval"},
		{wantErr: "give --interval or --schedule"},
	}
	for _, tc := range cases {
		t.Run(tc.spec+tc.interval.String(), func(t *testing.T) {
			s, err := ParseSchedule(tc.interval, tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Next(at).UTC(); !got.Equal(tc.next) {
				t.Fatalf("next after %s = %s, want %s", at, got, tc.next)
			}
		})
	}
}

func TestWindow(t *testing.T) {
	day := func(h, m int) time.Time { return time.Date(2026, 11, 22, h, m, 0, 0, time.UTC) }
	night, err := ParseWindow("22:00-06:00")
	if err != nil {
		t.Fatal(err)
	}
	office, err := ParseWindow("09:30-17:00")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		w    *Window
		at   time.Time
		want bool
	}{
		{night, day(23, 0), true}, {night, day(2, 0), true}, {night, day(22, 0), true},
		{night, day(6, 0), false}, {night, day(12, 0), false},
		{office, day(9, 30), true}, {office, day(16, 59), true}, {office, day(17, 0), false}, {office, day(8, 0), false},
		{nil, day(12, 0), true},
	} {
		if got := tc.w.Contains(tc.at); got != tc.want {
			t.Errorf("%s contains %s = %v, want %v", tc.w, tc.at.Format("15:04"), got, tc.want)
		}
	}
	for _, bad := range []string{"22:00", "25:00-06:00", "22:00-6", "10:00-10:00", "ab-cd"} {
		if _, err := ParseWindow(bad); err == nil || !strings.Contains(err.Error(), "--window") {
			t.Errorf("ParseWindow(%q) = %v, want an error naming --window", bad, err)
		}
	}
}
