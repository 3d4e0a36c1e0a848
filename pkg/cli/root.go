// Package cli assembles the rebalancer command line: one cobra command per
// verb, each a thin layer over the packages that do the work.
package cli

import (
	"fmt"
	"sync"

	"github.com/spf13/cobra"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json

	"github.com/rebalancer-dev/rebalancer/pkg/version"
)

var (
	applyLogging sync.Once
	errLogging   error
)

// NewRootCommand returns the `rebalancer` command with its subcommands.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "rebalancer",
		Short: "Evict misplaced pods, but only where the scheduler profile has a better node for them",
		Long: `rebalancer applies descheduler policies to a cluster and judges every eviction
they ask for by simulating the scheduler profile that rebalancer-scheduler runs:
a pod is evicted only if the simulation places it on a better node.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// kube-style logging flags: -v, --vmodule, --logging-format=json, ...
	logging := logsapi.NewLoggingConfiguration()
	logsapi.AddFlags(logging, root.PersistentFlags())
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		// Logging is process-wide and can be configured once per process.
		applyLogging.Do(func() { errLogging = logsapi.ValidateAndApply(logging, nil) })
		return errLogging
	}
	root.AddCommand(newPlanCommand(), newRunCommand(), newSimulateCommand(), newSnapshotCommand(), newVersionCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), version.String())
		},
	}
}
