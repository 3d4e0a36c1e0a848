package profile

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const kind = "KubeSchedulerConfiguration"

// checkStrict decodes the configuration into its versioned type, and the args
// of each in-tree plugin into the plugin's args type, reporting unknown and
// duplicate fields with their path in the file.
func checkStrict(data []byte) error {
	// YAMLToJSONStrict rejects duplicate keys, which YAMLToJSON resolves
	// silently to the last value.
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return fmt.Errorf("not valid YAML: %s", oneLine(err))
	}
	if bytes.Equal(js, []byte("null")) {
		return fmt.Errorf("empty file, want a %s %s", configv1.SchemeGroupVersion, kind)
	}
	if js[0] != '{' {
		return fmt.Errorf("not a YAML mapping, want a %s %s", configv1.SchemeGroupVersion, kind)
	}
	// Checked first: kube-scheduler's decoder would quote the whole file.
	var tm metav1.TypeMeta
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
		return errors.New(decodeError(err, ""))
	}
	if tm.APIVersion != configv1.SchemeGroupVersion.String() || tm.Kind != kind {
		return fmt.Errorf("apiVersion %q, kind %q: want apiVersion %q, kind %q", tm.APIVersion, tm.Kind, configv1.SchemeGroupVersion, kind)
	}

	var cfg configv1.KubeSchedulerConfiguration
	problems, err := decodeStrict(js, &cfg, "")
	if err != nil {
		return err
	}
	for i, prof := range cfg.Profiles {
		for j, pc := range prof.PluginConfig {
			if len(pc.Args.Raw) == 0 || bytes.Equal(pc.Args.Raw, []byte("null")) {
				continue
			}
			// The args type is found as kube-scheduler finds it; plugins
			// without one are out of tree and decode their own args.
			args, err := scheme.Scheme.New(configv1.SchemeGroupVersion.WithKind(pc.Name + "Args"))
			if runtime.IsNotRegisteredError(err) {
				continue
			}
			if err != nil {
				return err
			}
			argProblems, err := decodeStrict(pc.Args.Raw, args, fmt.Sprintf("profiles[%d].pluginConfig[%d].args", i, j))
			if err != nil {
				return err
			}
			problems = append(problems, argProblems...)
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// decodeStrict decodes JSON into v case-sensitively, as Kubernetes APIs do,
// and returns each unknown or duplicate field as "path: problem", the path
// prefixed with at. A decoding error, such as a wrong type, stops decoding and
// is returned as the error.
func decodeStrict(data []byte, v any, at string) ([]string, error) {
	strictErrs, err := kjson.UnmarshalStrict(data, v)
	if err != nil {
		return nil, errors.New(decodeError(err, at))
	}
	problems := make([]string, 0, len(strictErrs))
	for _, err := range strictErrs {
		var fieldErr kjson.FieldError
		if !errors.As(err, &fieldErr) {
			problems = append(problems, decodeError(err, at))
			continue
		}
		path := fieldErr.FieldPath()
		// The message is `unknown field "path"` or `duplicate field "path"`.
		problems = append(problems, fmt.Sprintf("%s: %s", joinPath(at, path), strings.TrimSuffix(err.Error(), " "+strconv.Quote(path))))
	}
	return problems, nil
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

func joinPath(at, path string) string {
	if at == "" {
		return path
	}
	return at + "." + path
}

// messages returns an error's messages, one per error of an aggregate, each
// on one line.
func messages(err error) []string {
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

func oneLine(err error) string {
	return strings.Join(messages(err), "; ")
}
