package snapshot

import (
	"bytes"
	"encoding/json"
	"testing"
)

// decoderPeek reads an object's first two keys with encoding/json's
// tokenizer: what peekType must agree with whenever it answers.
func decoderPeek(data []byte) (meta objectMeta, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return meta, false
	}
	for range 2 {
		key, err := dec.Token()
		if err != nil {
			return meta, false
		}
		value, err := dec.Token()
		s, isString := value.(string)
		if err != nil || !isString {
			return meta, false
		}
		switch {
		case key == "apiVersion" && meta.APIVersion == "":
			meta.APIVersion = s
		case key == "kind" && meta.Kind == "":
			meta.Kind = s
		default:
			return meta, false
		}
	}
	return meta, meta.APIVersion != "" && meta.Kind != ""
}

// TestPeekTypeReadsWhatWritersWrite: the layouts kubectl, the YAML
// conversion and rebalancer's own encoder write are peeked, not decoded
// twice; anything else is left to the decoder.
func TestPeekTypeReadsWhatWritersWrite(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want objectMeta
		ok   bool
	}{
		{`{"apiVersion":"v1","kind":"Pod","metadata":{}}`, objectMeta{APIVersion: "v1", Kind: "Pod"}, true},
		{"{\n    \"apiVersion\": \"apps/v1\",\n    \"kind\": \"ReplicaSet\",\n", objectMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"}, true},
		{`{"kind":"Node","apiVersion":"v1"}`, objectMeta{APIVersion: "v1", Kind: "Node"}, true},
		{`{"metadata":{},"apiVersion":"v1","kind":"Pod"}`, objectMeta{}, false},
		{`{"apiVersion":"v\u0031","kind":"Pod"}`, objectMeta{}, false}, // escapes: the decoder reads it
		{`{"apiVersion":"v1","apiVersion":"v2"}`, objectMeta{}, false},
		{`{"apiVersion":1,"kind":"Pod"}`, objectMeta{}, false},
		{`{"apiVersion":"v1"`, objectMeta{}, false},
		{`["apiVersion","v1"]`, objectMeta{}, false},
	} {
		got, ok := peekType([]byte(tc.in))
		if ok != tc.ok || got != tc.want {
			t.Errorf("peekType(%s) = %+v, %v; want %+v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzPeekType: whenever peekType answers, encoding/json reads the same
// apiVersion and kind from the same bytes.
func FuzzPeekType(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"v1","kind":"Pod","metadata":{}}`,
		"{ \"kind\" :\t\"Node\" ,\r\n\"apiVersion\":\"v1\"}",
		`{"apiVersion":"v\"1","kind":"Pod"}`,
		`{"apiVersion":"v1","kind":"Po` + "\x01" + `d"}`,
		`{"apiVersion":"","kind":"Pod"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := peekType(data)
		if !ok {
			return
		}
		want, wantOK := decoderPeek(data)
		if !wantOK || got != want {
			t.Errorf("peekType(%q) = %+v; encoding/json reads %+v, %v", data, got, want, wantOK)
		}
	})
}
