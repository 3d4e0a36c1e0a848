package snapshot

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// fastYAMLItems are YAML items as kubectl and the YAML library write
// them, which the fast conversion reads.
var fastYAMLItems = []string{
	"- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: web-1\n    labels:\n      app: web\n",
	"- a: 1\n  b: -7\n  c: \"8080\"\n  d: '0'\n  e: true\n  f: no\n  g: null\n  h: ~\n  i: {}\n  j: []\n",
	"- uid: 1f618ab5-66f1-f78f-9e37-79b97f4a7c15\n  ip: 10.0.0.1\n  image: nginx:1.27\n  url: http://x/#y\n  arg: -Xmx1g\n",
	"- s: \"a\\\"b\\\\c\\n\\t\\u00e9\"\n  q: 'it''s'\n  u: é ü 漢字 😀\n",
	"- k:\n  - a\n  - b\n  m:\n    - p: 1\n      q: 2\n    - p: 3\n",
	"- note: |\n    line one\n      indented\n\n    line three\n  other: |-\n    no newline\n  last: x\n",
	"- cmd:\n  - sh\n  - -c\n  - echo hi\n  empty:\n  \"quoted key\": 1\n",
}

// fastYAMLNearMisses are items the fast conversion may leave to the
// library (the fuzz test checks those it reads).
var fastYAMLNearMisses = []string{
	"- v: 1.5\n  w: 1e3\n  x: 0x1F\n  y: 017\n  z: 1_000\n",
	"- s: \"\\u2028 \\x41 \\U0001F600\"\n",
	"- t: 2026-01-02T03:04:05Z\n  d: 2026-01-02\n  s: \"2026-01-02T03:04:05Z\"\n",
	"- cmd:\n  - sh\n  - -c\n  - echo hi: there\n",
	"- a: b\n  a: c\n",
	"- a: &x 1\n  b: *x\n",
	"- a: !!str 1\n",
	"- a: b # comment\n",
	"- a: long\n    continued\n",
	"- a: \"multi\n    line\"\n",
	"- a: >\n    folded\n",
	"- a: |+\n    kept\n\n",
	"- - nested\n",
	"- \"quoted key\": 1\n  'other': 2\n",
	"- y: 1\n  on: 2\n",
	"- 1: a\n",
	"- a: .inf\n  b: -.inf\n  c: .nan\n  d: .hidden\n  e: +5\n  f: -0\n",
	"- a: 99999999999999999999\n  b: -9223372036854775808\n",
	"- a:\tb\n",
	"- a: b\r\n",
	"- a: \x01\n",
	"- a: \u0085\n",
	"- a: [1, 2]\n",
	"- a: {b: c}\n",
	"- ? a\n  : b\n",
	"- a: b:\n",
	"- a: -\n",
	"- a: <<\n",
	"- a:\n",
	"-\n  a: 1\n",
}

// sameJSON says whether two JSON texts hold the same value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	decode := func(data []byte) any {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("invalid JSON %s: %v", data, err)
		}
		return v
	}
	return reflect.DeepEqual(decode(a), decode(b))
}

// FuzzFastYAML: whenever the fast conversion answers, the library accepts
// the input and converts it to the same value.
func FuzzFastYAML(f *testing.F) {
	for _, s := range append(fastYAMLItems, fastYAMLNearMisses...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := fastYAMLToJSON(data)
		if !ok {
			return
		}
		want, err := yaml.YAMLToJSONStrict(data)
		if err != nil {
			t.Fatalf("fast conversion of %q gave %s; the library rejects it: %v", data, got, err)
		}
		if !sameJSON(t, got, want) {
			t.Fatalf("fast conversion of %q gave %s; the library %s", data, got, want)
		}
	})
}

// TestFastYAMLReadsWhatSnapshotsHold: every item of a snapshot as
// rebalancer writes it (nodes and pods as kubectl captures them), and the
// usual layouts of kubectl's own, go the fast way, to what the library
// makes of them.
func TestFastYAMLReadsWhatSnapshotsHold(t *testing.T) {
	var buf bytes.Buffer
	if err := synthetic(3, 4).Encode(&buf); err != nil {
		t.Fatal(err)
	}
	items, err := split("snap.yaml", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 3+3*4 {
		t.Fatalf("%d items, want 15", len(items))
	}
	for _, it := range items {
		got, ok := fastYAMLToJSON(it.data)
		if !ok {
			t.Errorf("item left to the library:\n%s", it.data)
			continue
		}
		want, err := yaml.YAMLToJSONStrict(it.data)
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, got, want) {
			t.Errorf("fast conversion of\n%s\ngave %s; the library %s", it.data, got, want)
		}
	}
	for _, s := range fastYAMLItems {
		got, ok := fastYAMLToJSON([]byte(s))
		if !ok {
			t.Errorf("left to the library:\n%s", s)
			continue
		}
		if want, err := yaml.YAMLToJSONStrict([]byte(s)); err != nil || !sameJSON(t, got, want) {
			t.Errorf("fast conversion of\n%s\ngave %s; the library %s (%v)", s, got, want, err)
		}
	}
}
