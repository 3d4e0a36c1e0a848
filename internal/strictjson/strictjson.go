// Package strictjson is rebalancer's one strict JSON decoder, for
// configuration files and snapshots alike: field names match
// case-sensitively, as the API server matches them, and unknown and
// duplicate fields are reported, with their path in the file, rather than
// dropped; a value that does not decode is named by its path too
// (DecodeLocated). Its errors are worded for the person who wrote the file.
package strictjson

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Document converts a YAML or JSON file to JSON, rejecting duplicate keys,
// which a lenient conversion would resolve silently to the last value, and
// checks that the file is a mapping whose apiVersion and kind are gv and
// kind.
func Document(data []byte, gv schema.GroupVersion, kind string) ([]byte, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML: %s", OneLine(err))
	}
	if bytes.Equal(js, []byte("null")) {
		return nil, fmt.Errorf("empty file, want a %s %s", gv, kind)
	}
	if js[0] != '{' {
		return nil, fmt.Errorf("not a YAML mapping, want a %s %s", gv, kind)
	}
	var tm metav1.TypeMeta
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
		return nil, errors.New(decodeError(err, ""))
	}
	if tm.APIVersion != gv.String() || tm.Kind != kind {
		return nil, fmt.Errorf("apiVersion %q, kind %q: want apiVersion %q, kind %q", tm.APIVersion, tm.Kind, gv, kind)
	}
	return js, nil
}

// Decode decodes JSON into v case-sensitively, as Kubernetes APIs do, and
// returns each unknown or duplicate field as "path: problem", the path
// prefixed with at (as in "profiles[0].pluginConfig[1].args"), with a "did
// you mean" hint when the field differs from one of v's only by case. A
// decoding error, such as a wrong type, stops decoding and is returned as the
// error, worded "path: problem" too.
func Decode(data []byte, v any, at string) (problems []string, err error) {
	strictErrs, err := kjson.UnmarshalStrict(data, v)
	if err != nil {
		return nil, errors.New(decodeError(err, at))
	}
	problems = make([]string, 0, len(strictErrs))
	for _, err := range strictErrs {
		path, hint, ok := field(err, v)
		if !ok {
			problems = append(problems, decodeError(err, at))
			continue
		}
		// The message is `unknown field "path"` or `duplicate field "path"`.
		problem := fmt.Sprintf("%s: %s", joinPath(at, path), strings.TrimSuffix(err.Error(), " "+strconv.Quote(path)))
		problems = append(problems, problem+hint)
	}
	return problems, nil
}

// Unmarshal decodes JSON into v as Decode does, for a caller that wants one
// error and sigs.k8s.io/json's own wording: it returns the decoding error as
// is, or else the unknown and duplicate fields joined by errors.Join, each
// worded `unknown field "path"` or `duplicate field "path"` with Decode's
// hint, or nil.
func Unmarshal(data []byte, v any) error {
	strictErrs, err := kjson.UnmarshalStrict(data, v)
	if err != nil {
		return err
	}
	for i, err := range strictErrs {
		if _, hint, ok := field(err, v); ok && hint != "" {
			strictErrs[i] = fmt.Errorf("%w%s", err, hint)
		}
	}
	return errors.Join(strictErrs...)
}

// field returns the path of the field that a strict error of
// sigs.k8s.io/json names, and the hint for it, " (did you mean "name"?)" or
// "", or false if the error names no field.
func field(err error, v any) (path, hint string, ok bool) {
	var fieldErr kjson.FieldError
	if !errors.As(err, &fieldErr) {
		return "", "", false
	}
	path = fieldErr.FieldPath()
	if name := caseFold(reflect.TypeOf(v), path); name != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", name)
	}
	return path, hint, true
}

// Messages returns an error's messages, one per error of an aggregate
// (k8s.io/apimachinery/pkg/util/errors), each on one line.
func Messages(err error) []string {
	errs := []error{err}
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		errs = utilerrors.Flatten(agg).Errors()
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = strings.Join(strings.Fields(e.Error()), " ")
	}
	return msgs
}

// OneLine returns an error's Messages joined by "; ".
func OneLine(err error) string {
	return strings.Join(Messages(err), "; ")
}

// typeError matches the message of sigs.k8s.io/json's UnmarshalTypeError,
// whose type is internal. Its Field is the dotted path from the root, without
// list indexes.
var typeError = regexp.MustCompile(`^json: cannot unmarshal (.+) into Go (?:struct field \w+\.(\S+)|value) of type (.+)$`)

// decodeError words a decoding error as "path: problem", the path prefixed
// with at.
func decodeError(err error, at string) string {
	msg := err.Error()
	if m := typeError.FindStringSubmatch(msg); m != nil {
		msg = fmt.Sprintf("cannot unmarshal %s into %s", m[1], m[3])
		if m[2] != "" {
			at = joinPath(at, m[2])
		}
	}
	if at == "" {
		return msg
	}
	return at + ": " + msg
}

// joinPath appends child to the path parent: "a.b", "a[0]", or child alone.
func joinPath(parent, child string) string {
	switch {
	case parent == "":
		return child
	case child == "" || strings.HasPrefix(child, "["):
		return parent + child
	}
	return parent + "." + child
}

// caseFold returns the field of t that path's last element names in another
// case, or "" (also when it names a field of t exactly). JSON field names in Kubernetes APIs are case-sensitive and
// lenient decoders drop such a field silently, which is easy to trip over:
// the descheduler's extension points are spelt preevictionfilter and presort.
func caseFold(t reflect.Type, path string) string {
	elems := strings.Split(path, ".")
	for _, elem := range elems[:len(elems)-1] {
		if t = child(t, elem); t == nil {
			return ""
		}
	}
	last := elems[len(elems)-1]
	for _, f := range jsonFields(t) {
		// Not the field itself, which a duplicate field names.
		if f.name != last && strings.EqualFold(f.name, last) {
			return f.name
		}
	}
	return ""
}

// child returns the type that a path element such as "profiles[0]" selects
// within t, or nil.
func child(t reflect.Type, elem string) reflect.Type {
	name, _, _ := strings.Cut(elem, "[")
	switch t = indirect(t); t.Kind() {
	case reflect.Struct:
		i := slices.IndexFunc(jsonFields(t), func(f jsonField) bool { return f.name == name })
		if i < 0 {
			return nil
		}
		t = jsonFields(t)[i].typ
	case reflect.Map:
		t = t.Elem()
	default:
		return nil
	}
	for range strings.Count(elem, "[") {
		if t == nil {
			return nil
		}
		if t = indirect(t); t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return nil
		}
		t = t.Elem()
	}
	return t
}

type jsonField struct {
	name string
	typ  reflect.Type
}

// jsonFields lists the fields of a struct by their JSON names, in their
// order, with the fields of inlined embedded structs (such as TypeMeta,
// `json:",inline"`) promoted.
func jsonFields(t reflect.Type) []jsonField {
	var fields []jsonField
	if t = indirect(t); t.Kind() != reflect.Struct {
		return fields
	}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported() && !f.Anonymous:
		case f.Anonymous && name == "":
			fields = append(fields, jsonFields(f.Type)...)
		case name == "":
			fields = append(fields, jsonField{name: f.Name, typ: f.Type})
		default:
			fields = append(fields, jsonField{name: name, typ: f.Type})
		}
	}
	return fields
}

func indirect(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}
