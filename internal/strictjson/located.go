package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	sjson "sigs.k8s.io/json"
)

// DecodeLocated decodes JSON into obj as the API server does (field names are
// case-sensitive) and also rejects unknown and duplicate fields, which the API
// server would drop or merge silently. The error names the field.
func DecodeLocated(data []byte, obj any) error {
	strict, err := sjson.UnmarshalStrict(data, obj, sjson.DisallowDuplicateFields, sjson.DisallowUnknownFields)
	if err != nil {
		return Located(reflect.TypeOf(obj), data, err)
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}

// Located rewrites err, which decoding data into a value of type t returned,
// as "path: invalid value V: reason". encoding/json reports a failing
// UnmarshalJSON method (resource.Quantity, metav1.Time) with no path at all and
// a type error with no list indexes, so located finds the culprit by decoding
// data piece by piece. Only failed decodes pay for this.
func Located(t reflect.Type, data []byte, err error) error {
	path, value, cause := locate(t, data)
	if cause == nil {
		return err
	}
	reason := strings.TrimPrefix(cause.Error(), "json: ")
	var typeErr *json.UnmarshalTypeError
	if errors.As(cause, &typeErr) {
		reason = fmt.Sprintf("expected %s, got %s", typeErr.Type, typeErr.Value)
	}
	msg := fmt.Sprintf("invalid value %s: %s", Abbreviate(value), reason)
	if path == "" {
		return errors.New(msg)
	}
	return fmt.Errorf("%s: %s", path, msg)
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// locate returns the path, relative to t, and the JSON of the innermost value
// in data that fails to decode, and the error decoding it gives.
func locate(t reflect.Type, data []byte) (path string, value []byte, err error) {
	if err = sjson.UnmarshalCaseSensitivePreserveInts(data, reflect.New(t).Interface()); err == nil {
		return "", nil, nil
	}
	t = indirect(t)
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return "", data, err
	}
	switch t.Kind() {
	case reflect.Struct:
		var fields map[string]json.RawMessage
		if json.Unmarshal(data, &fields) != nil {
			break
		}
		for _, f := range jsonFields(t) {
			if raw, ok := fields[f.name]; ok {
				if p, v, e := locate(f.typ, raw); e != nil {
					return joinPath(f.name, p), v, e
				}
			}
		}
	case reflect.Slice:
		var elems []json.RawMessage
		if json.Unmarshal(data, &elems) != nil {
			break
		}
		for i, raw := range elems {
			if p, v, e := locate(t.Elem(), raw); e != nil {
				return joinPath(fmt.Sprintf("[%d]", i), p), v, e
			}
		}
	case reflect.Map:
		var entries map[string]json.RawMessage
		if json.Unmarshal(data, &entries) != nil {
			break
		}
		for _, k := range slices.Sorted(maps.Keys(entries)) {
			if p, v, e := locate(t.Elem(), entries[k]); e != nil {
				return joinPath(mapKey(k), p), v, e
			}
		}
	}
	return "", data, err
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// mapKey writes a map key as a path element: "cpu", but "[nvidia.com/gpu]" for
// keys that would read as more than one element.
func mapKey(k string) string {
	if plainKey.MatchString(k) {
		return k
	}
	return "[" + k + "]"
}

// Abbreviate shortens a value quoted in an error message.
func Abbreviate(data []byte) string {
	limit := 60
	if len(data) <= limit {
		return string(data)
	}
	for !utf8.RuneStart(data[limit]) {
		limit--
	}
	return string(data[:limit]) + "..."
}
