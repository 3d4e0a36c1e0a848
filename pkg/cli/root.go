// Package cli assembles the rebalancer command line: one cobra command per
// verb, each a thin layer over the packages that do the work.
package cli

import (
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/klog/v2"

	"github.com/rebalancer-dev/rebalancer/internal/liblog"
	"github.com/rebalancer-dev/rebalancer/internal/output"
	"github.com/rebalancer-dev/rebalancer/internal/suggest"
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
	// Every command takes them; as kubectl does with its global flags, help
	// lists them under `rebalancer options` rather than before each
	// command's own flags.
	logging := logsapi.NewLoggingConfiguration()
	logsapi.AddFlags(logging, root.PersistentFlags())
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) { f.Hidden = true })
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		// Logging is process-wide and can be configured once per process.
		applyLogging.Do(func() { errLogging = logsapi.ValidateAndApply(logging, nil) })
		if errLogging != nil {
			return errLogging
		}
		if err := checkNumbers(cmd.Flags()); err != nil {
			return err
		}
		cmd.SetContext(klog.NewContext(cmd.Context(), quietLibraries()))
		return nil
	}
	root.SetFlagErrorFunc(suggestFlag)
	root.AddCommand(newPlanCommand(), newRunCommand(), newSimulateCommand(), newSnapshotCommand(), newExtenderCommand(), newWebhookCommand(), newEstimatorCommand(), newVersionCommand(), newOptionsCommand())
	checkValueAfterSpace(root)
	root.SetUsageTemplate(root.UsageTemplate() + "\nUse \"rebalancer options\" for the logging flags every command accepts (-v, --vmodule, --logging-format, ...).\n")
	return root
}

// noArgs refuses positional arguments, as cobra.NoArgs does, and points a
// file given without its flag at the flag that takes it.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	err := fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())
	if f := cmd.Flags().Lookup("snapshot"); f != nil && strings.ContainsAny(args[0], "./") {
		return fmt.Errorf("%w: to read the snapshot file, give --snapshot %s", err, args[0])
	}
	return fmt.Errorf("%w: it takes no arguments, only flags (see --help)", err)
}

// checkValueAfterSpace makes every command of root refuse a value given
// after a space to a flag that takes its value only with "=": a bool flag
// (--dry-run), or one with a value of its own when given alone
// (--hold-empty-nodes). pflag reads --dry-run false as --dry-run and an
// argument "false", which the command's Args then refuses as an unknown
// command without a word about the flag; the error names the flag and the
// spelling that works (kubectl's convention: --dry-run=false).
//
// pflag tells a Value nothing of where on the command line it was set, but
// it resolves every flag it parses through the flag set's normalization
// function, which sees how many arguments the parse has collected so far:
// the last flag resolved with i arguments before it is the one right before
// argument i.
func checkValueAfterSpace(root *cobra.Command) {
	type resolved struct {
		fs   *pflag.FlagSet
		name string
		args int // the arguments parsed before the flag
	}
	var trail []resolved
	checked := false // the arguments, after which nothing is recorded
	root.SetGlobalNormalizationFunc(func(fs *pflag.FlagSet, name string) pflag.NormalizedName {
		// Before its parse, a flag set is only looked up (by cobra, to find
		// the command); after it, its arguments are all there, more than
		// before any of them.
		if fs.Parsed() && !checked {
			trail = append(trail, resolved{fs, name, fs.NArg()})
		}
		return pflag.NormalizedName(name)
	})
	// flagBefore returns the flag right before argument i of cmd's parse.
	flagBefore := func(cmd *cobra.Command, i int) *pflag.Flag {
		fs := cmd.Flags()
		for k := len(trail) - 1; k >= 0; k-- {
			if r := trail[k]; r.fs == fs && r.args == i {
				return fs.Lookup(r.name)
			}
		}
		return nil
	}
	var wrap func(*cobra.Command)
	wrap = func(c *cobra.Command) {
		if validate := c.Args; validate != nil {
			c.Args = func(cmd *cobra.Command, args []string) error {
				defer func() { checked, trail = true, nil }()
				for i, arg := range args {
					if dash := cmd.ArgsLenAtDash(); dash >= 0 && i >= dash {
						break // after --, arguments whatever they look like
					}
					// Given alone, the flag holds the value it has alone.
					f := flagBefore(cmd, i)
					if f == nil || f.NoOptDefVal == "" || f.Value.String() != f.NoOptDefVal {
						continue
					}
					if _, err := strconv.ParseBool(arg); f.Value.Type() == "bool" && err != nil {
						continue // not a value for it: an argument, refused as such
					}
					return fmt.Errorf("--%s takes its value with \"=\": --%s=%s (after a space, %q is an argument, which %s does not take, and --%s alone means --%s=%s)",
						f.Name, f.Name, arg, arg, cmd.CommandPath(), f.Name, f.Name, f.NoOptDefVal)
				}
				return validate(cmd, args)
			}
		}
		for _, sub := range c.Commands() {
			wrap(sub)
		}
	}
	wrap(root)
}

// suggestFlag answers a misspelt flag with the flag it most likely meant.
func suggestFlag(cmd *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return err
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	if s := suggest.Closest(name, names); s != "" {
		return fmt.Errorf("%w (did you mean --%s?)", err, s)
	}
	return err
}

// checkNumbers refuses NaN and infinities in every number flag of a
// command, before the command's own checks (which compare, and NaN passes
// every comparison that is false): no flag means "not a number", and those
// without a limit take 0 for it.
func checkNumbers(flags *pflag.FlagSet) error {
	var errs []error
	flags.Visit(func(f *pflag.Flag) {
		if t := f.Value.Type(); t != "float32" && t != "float64" {
			return
		}
		if v, err := strconv.ParseFloat(f.Value.String(), 64); err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
			errs = append(errs, fmt.Errorf("--%s %s: want a finite number", f.Name, f.Value))
		}
	})
	return errors.Join(errs...)
}

// quietLibraries returns rebalancer's own logger and makes klog's global
// logger a quiet copy of it: libraries that log through klog's global
// functions or klog.TODO() (kube-scheduler's configuration defaulting, the
// descheduler's evictor) are then as quiet as those rebalancer hands a
// liblog.Quiet logger, while rebalancer logs through the returned logger,
// which the command's context carries.
func quietLibraries() klog.Logger {
	own := klog.Background()
	quiet.Do(func() {
		// klog's own logger writes through klog's global functions: made
		// the global logger, it would call itself.
		if own.GetSink() == nil || reflect.TypeOf(own.GetSink()) == reflect.TypeOf(klog.NewKlogr().GetSink()) {
			return
		}
		klog.SetLoggerWithOptions(liblog.Quiet(own), klog.ContextualLogger(true))
	})
	return own
}

var quiet sync.Once

// newOptionsCommand lists the flags every command accepts, as `kubectl
// options` does.
func newOptionsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "options",
		Short: "Print the logging flags every command accepts",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A fresh set: the root's copies are hidden from help.
			fs := pflag.NewFlagSet("logging", pflag.ContinueOnError)
			logsapi.AddFlags(logsapi.NewLoggingConfiguration(), fs)
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "The following options can be passed to any command:\n\n%s", fs.FlagUsages())
			return err
		},
	}
}

func newVersionCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date, and the Kubernetes and descheduler versions built in",
		Example: `  rebalancer version
  rebalancer version -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !slices.Contains(output.Formats, format) {
				return fmt.Errorf("--output %q: want one of %s", format, strings.Join(output.Formats, ", "))
			}
			return output.Print(cmd.OutOrStdout(), format, version.Get(), func(w io.Writer) error {
				_, err := fmt.Fprintln(w, version.String())
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", "table", "output format: "+strings.Join(output.Formats, ", ")+" (table: one line)")
	return cmd
}
