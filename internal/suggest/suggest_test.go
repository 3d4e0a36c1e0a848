package suggest

import "testing"

func TestClosest(t *testing.T) {
	plugins := []string{"Consolidation", "DefaultEvictor", "HighNodeUtilization", "LowNodeUtilization", "MakeRoom", "RemoveDuplicates"}
	for word, want := range map[string]string{
		"Consolidaton":        "Consolidation",
		"consolidation":       "Consolidation", // case only
		"HighNodeUtilisation": "HighNodeUtilization",
		"LowNodeUtil":         "", // too far: a prefix is not a typo
		"Spread":              "",
		"":                    "",
		"MakeRom":             "MakeRoom",
	} {
		if got := Closest(word, plugins); got != want {
			t.Errorf("Closest(%q) = %q, want %q", word, got, want)
		}
	}
	if got := Closest("polcy", []string{"policy", "snapshot", "output"}); got != "policy" {
		t.Errorf("Closest(polcy) = %q, want policy", got)
	}
}
