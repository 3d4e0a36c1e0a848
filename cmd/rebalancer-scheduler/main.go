// Command rebalancer-scheduler is kube-scheduler with rebalancer's plugins
// registered. Every kube-scheduler flag and behaviour is kept; run it with a
// KubeSchedulerConfiguration from policies/.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as in kube-scheduler
	_ "k8s.io/component-base/metrics/prometheus/version"  // build info metric
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/rebalancer-dev/rebalancer/pkg/scheduler"
)

func main() {
	var plugins []app.Option
	for name, factory := range scheduler.Registry(nil, nil) {
		plugins = append(plugins, app.WithPlugin(name, factory))
	}
	command := app.NewSchedulerCommand(plugins...)
	command.Use = "rebalancer-scheduler"
	os.Exit(cli.Run(command))
}
