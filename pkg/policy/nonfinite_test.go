package policy

import (
	"reflect"
	"testing"
)

// TestNonFinite: the non-finite numbers of a document, wherever YAML puts
// them, by path and line; none for text that only looks like one, and no
// panic on a document that holds the marker itself.
func TestNonFinite(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"block", "a:\n  b: .nan\n", []string{"a.b: invalid value .nan: want a finite number (line 2)"}},
		{"flow", "a: {b: [1, -.inf,+.Inf]}\n", []string{
			"a.b[1]: invalid value -.inf: want a finite number (line 1)",
			"a.b[2]: invalid value +.Inf: want a finite number (line 1)",
		}},
		{"plugin args", "profiles:\n- pluginConfig:\n  - name: P\n    args: {x: .NAN} # .nan\n", []string{
			"profiles[0].pluginConfig[0].args.x: invalid value .NAN: want a finite number (line 4, plugin P)",
		}},
		{"key needing brackets", "t: {nvidia.com/gpu: .inf}\n", []string{"t[nvidia.com/gpu]: invalid value .inf: want a finite number (line 1)"}},
		{"anchor", "a: &x .nan\nb: *x\n", []string{"a: invalid value .nan: want a finite number (line 1)"}},
		{"quoted", "a: \".nan\"\nb: '.inf'\n", nil},
		{"in a word", "a: x.nan\nb: .nanx\nc: a .nan b\n", nil},
		{"marker in the file", "a: rebalancer-non-finite-number--1\nb: rebalancer-non-finite-number-7\nc: .nan\n", []string{
			"c: invalid value .nan: want a finite number (line 3)",
		}},
		{"not YAML once swapped", "a: !!float .nan\n", nil},
		{"none", "a: 1\n", nil},
		{"newline in a key and a name", "\"a\\nb\": [{name: \"P\\nQ\", args: {x: .nan}}]\n", []string{
			`[a\nb][0].args.x: invalid value .nan: want a finite number (line 1, plugin P\nQ)`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nonFinite([]byte(tc.doc)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("nonFinite(%q) =\n%q\nwant\n%q", tc.doc, got, tc.want)
			}
		})
	}
}
