// Package profile loads KubeSchedulerConfiguration files
// (kubescheduler.config.k8s.io/v1): the scheduler profiles the rebalancer
// simulates and rebalancer-scheduler runs.
package profile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"

	"github.com/rebalancer-dev/rebalancer/internal/liblog"
	"github.com/rebalancer-dev/rebalancer/internal/strictjson"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/rebalancehint"
)

// Load reads the KubeSchedulerConfiguration at path strictly: unknown and
// duplicate fields, in-tree plugins' args included, are errors naming their
// path, e.g.
//
//	scheduler.yaml: profiles[0].pluginConfg: unknown field
//
// It decodes and defaults the file with kube-scheduler's own loader, validates
// it with kube-scheduler's validation and returns the configuration and its
// profile named schedulerName; "" selects the only profile. Every error is one
// line starting with path.
//
// Args of out-of-tree plugins, such as RebalanceHint, stay *runtime.Unknown;
// the plugin decodes them when the profile's framework is built. RebalanceHint's
// are validated here too, so a bad hintTTL is reported with path.
func Load(path, schedulerName string) (*config.KubeSchedulerConfiguration, *config.KubeSchedulerProfile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pathErr *fs.PathError
		if errors.As(err, &pathErr) {
			err = pathErr.Err // its message repeats the path
		}
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	// kube-scheduler's loader is strict too, but reports args fields without
	// their path in the file, nested in three "strict decoding error"s.
	if err := checkStrict(data); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	cfg, err := options.LoadConfigFromFile(liblog.Quiet(klog.Background()), path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %s", path, strictjson.OneLine(err))
	}
	if err := validate(cfg); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(cfg.Extenders) > 0 {
		// The simulation runs the profile's plugins only: with an extender
		// it would predict placements the scheduler does not make.
		return nil, nil, fmt.Errorf("%s: extenders[0] (urlPrefix %q): rebalancer cannot simulate scheduler extenders, so its plans would not be what this scheduler does; remove the extenders from the file given to rebalancer", path, cfg.Extenders[0].URLPrefix)
	}
	prof, err := pick(cfg, schedulerName)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, prof, nil
}

// validate runs kube-scheduler's validation, and validates NodeResourcesFit's
// args, which it skips: its table of args validators lists that plugin as
// "NodeResourcesFitArgs", so kube-scheduler itself notices a bad scoring
// strategy only when it builds the plugin.
func validate(cfg *config.KubeSchedulerConfiguration) error {
	var msgs []string
	seen := map[string]bool{}
	add := func(err error) {
		if err == nil {
			return
		}
		// Should kube-scheduler fix its table, its messages for
		// NodeResourcesFit are not given twice.
		for _, msg := range strictjson.Messages(err) {
			if !seen[msg] {
				seen[msg] = true
				msgs = append(msgs, msg)
			}
		}
	}
	if err := validation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		add(err)
	}
	for i, prof := range cfg.Profiles {
		for j, pc := range prof.PluginConfig {
			if args, ok := pc.Args.(*config.NodeResourcesFitArgs); ok {
				add(validation.ValidateNodeResourcesFitArgs(field.NewPath("profiles").Index(i).Child("pluginConfig").Index(j).Child("args"), args))
			}
			if pc.Name == rebalancehint.Name {
				if err := rebalancehint.ValidateArgs(pc.Args); err != nil {
					msgs = append(msgs, fmt.Sprintf("profiles[%d].%s", i, err))
				}
			}
		}
	}
	if len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}

// pick returns the profile named schedulerName, or the only one if that is "".
func pick(cfg *config.KubeSchedulerConfiguration, schedulerName string) (*config.KubeSchedulerProfile, error) {
	if schedulerName == "" && len(cfg.Profiles) == 1 {
		return &cfg.Profiles[0], nil
	}
	names := make([]string, len(cfg.Profiles))
	for i := range cfg.Profiles {
		if cfg.Profiles[i].SchedulerName == schedulerName {
			return &cfg.Profiles[i], nil
		}
		names[i] = fmt.Sprintf("%q", cfg.Profiles[i].SchedulerName)
	}
	if schedulerName == "" {
		return nil, fmt.Errorf("%d profiles (schedulerName %s): name the one to use", len(cfg.Profiles), strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("no profile with schedulerName %q, only %s", schedulerName, strings.Join(names, ", "))
}
