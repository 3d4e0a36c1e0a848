// Command rebalancer-karmada-scheduler is karmada-scheduler with
// rebalancer's RebalancerEstimate plugin registered, as Karmada documents a
// custom scheduler (app.NewSchedulerCommand with app.WithPlugin): it takes
// every flag karmada-scheduler takes, and --rebalancer-score. It is a module
// of its own so that Karmada's Kubernetes versions never move rebalancer's.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json, as karmada-scheduler accepts it
	controllerruntime "sigs.k8s.io/controller-runtime"

	"github.com/karmada-io/karmada/cmd/scheduler/app"

	"github.com/rebalancer-dev/rebalancer/cmd/rebalancer-karmada-scheduler/rebalancerestimate"
)

func main() {
	ctx := controllerruntime.SetupSignalHandler()
	args := &rebalancerestimate.Args{}
	cmd := app.NewSchedulerCommand(ctx, app.WithPlugin(rebalancerestimate.Name, rebalancerestimate.Factory(args)))
	cmd.Use = "rebalancer-karmada-scheduler"

	own := pflag.NewFlagSet(rebalancerestimate.Name, pflag.ContinueOnError)
	args.AddFlags(own)
	cmd.Flags().AddFlagSet(own)
	// karmada-scheduler's help lists its own flag sets only.
	help := cmd.HelpFunc()
	cmd.SetHelpFunc(func(c *cobra.Command, a []string) {
		help(c, a)
		fmt.Fprintf(c.OutOrStdout(), "\n%s flags:\n\n%s", rebalancerestimate.Name, own.FlagUsages())
	})
	// A bad --rebalancer-score is named before anything starts.
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, a []string) error {
		if err := args.Validate(); err != nil {
			return err
		}
		return run(c, a)
	}

	code := cli.Run(cmd)
	logs.FlushLogs()
	os.Exit(code)
}
