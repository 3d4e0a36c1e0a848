package profile

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	"github.com/rebalancer-dev/rebalancer/internal/strictjson"
)

const kind = "KubeSchedulerConfiguration"

// checkStrict decodes the configuration into its versioned type, and the args
// of each in-tree plugin into the plugin's args type, reporting unknown and
// duplicate fields with their path in the file.
func checkStrict(data []byte) error {
	// The apiVersion and kind are checked first: kube-scheduler's decoder
	// would quote the whole file.
	js, err := strictjson.Document(data, configv1.SchemeGroupVersion, kind)
	if err != nil {
		return err
	}
	var cfg configv1.KubeSchedulerConfiguration
	problems, err := strictjson.Decode(js, &cfg, "")
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
			argProblems, err := strictjson.Decode(pc.Args.Raw, args, fmt.Sprintf("profiles[%d].pluginConfig[%d].args", i, j))
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
