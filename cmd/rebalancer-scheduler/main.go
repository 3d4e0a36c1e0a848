// Command rebalancer-scheduler is kube-scheduler with rebalancer's plugins
// registered. Every kube-scheduler flag and behaviour is kept; run it with a
// KubeSchedulerConfiguration from policies/.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as in kube-scheduler
	_ "k8s.io/component-base/metrics/prometheus/version"  // build info metric
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/rebalancer-dev/rebalancer/pkg/scheduler"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/skew"
	"github.com/rebalancer-dev/rebalancer/pkg/version"
)

func main() {
	var plugins []app.Option
	var checked skew.Once
	built := version.Get().Kubernetes
	for name, factory := range scheduler.Registry(nil, nil) {
		if built != "" {
			factory = skew.Checked(factory, built, &checked)
		}
		plugins = append(plugins, app.WithPlugin(name, factory))
	}
	command := app.NewSchedulerCommand(plugins...)
	command.Use = "rebalancer-scheduler"
	printVersion(command)
	os.Exit(cli.Run(command))
}

// printVersion makes --version print the Kubernetes version the scheduler is
// built from, as kube-scheduler does, and rebalancer's own: kube-scheduler
// reads its version from variables only the Kubernetes build's -ldflags
// set, so a plain `go build` would print v0.0.0-master. --version=raw is
// left to kube-scheduler.
func printVersion(command *cobra.Command) {
	run := command.RunE
	command.RunE = func(cmd *cobra.Command, args []string) error {
		if f := cmd.Flags().Lookup("version"); f != nil && f.Value.String() == "true" {
			v := version.Get()
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "Kubernetes %s\n%s\n", v.Kubernetes, version.String())
			return err
		}
		return run(cmd, args)
	}
}
