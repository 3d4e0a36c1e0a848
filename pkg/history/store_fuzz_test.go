package history

import (
	"testing"
	"time"
)

// FuzzDecode: any bytes decode to a valid history or an error, never a
// panic, and a decoded history survives its own encoding unchanged.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"version":1,"moves":[{"owner":"u","workload":"ReplicaSet a/b","from":"node-a","to":"node-b","at":"2026-01-01T00:00:00Z","plan":"p"}]}`))
	f.Add([]byte(`{"version":1,"moves":[]}`))
	f.Add([]byte(`{"version":1,"moves":null}`))
	f.Add([]byte(`{"version":1,"moves":[{"owner":"u","to":"n","at":"0001-01-01T00:00:00Z"}]}`))
	f.Add([]byte("\xef\xbb\xbf{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		moves, _, err := Decode(data)
		if err != nil {
			return
		}
		again, dropped, err := Decode(encode(moves))
		if len(dropped) > 0 {
			t.Fatalf("a kept move is dropped after encoding: %v", dropped)
		}
		if err != nil {
			t.Fatalf("a decoded history does not decode after encoding: %v", err)
		}
		if len(again) != len(moves) {
			t.Fatalf("round trip: %d moves, want %d", len(again), len(moves))
		}
		for i := range moves {
			if again[i].Owner != moves[i].Owner || again[i].To != moves[i].To || !again[i].At.Equal(moves[i].At) {
				t.Fatalf("round trip changed move %d: %+v, want %+v", i, again[i], moves[i])
			}
			if again[i].At.Before(time.Unix(0, 0)) {
				t.Fatalf("move %d has no time", i)
			}
		}
	})
}
