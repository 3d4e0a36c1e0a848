package main

import (
	"slices"
	"testing"
)

func TestPlanSizes(t *testing.T) {
	got, err := planSizes("1000, 5000,20000,50000", 20000)
	if err != nil || !slices.Equal(got, []int{1000, 5000, 20000}) {
		t.Errorf("capped at 20000: %v, %v", got, err)
	}
	if got, err := planSizes("1000,50000", 0); err != nil || !slices.Equal(got, []int{1000, 50000}) {
		t.Errorf("no cap: %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "x", "50001", "1000,,5000"} {
		if _, err := planSizes(bad, 0); err == nil {
			t.Errorf("-nodes %q: no error", bad)
		}
	}
}
