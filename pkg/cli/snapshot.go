package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/rebalancer-dev/rebalancer/internal/readfile"
	"github.com/rebalancer-dev/rebalancer/pkg/gang"
	"github.com/rebalancer-dev/rebalancer/pkg/inputs"
	"github.com/rebalancer-dev/rebalancer/pkg/live"
	"github.com/rebalancer-dev/rebalancer/pkg/openb"
	"github.com/rebalancer-dev/rebalancer/pkg/profile"
	"github.com/rebalancer-dev/rebalancer/pkg/session"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
	"github.com/rebalancer-dev/rebalancer/pkg/synthetic"
)

func newSnapshotCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Write snapshot files: generated clusters, the openb trace replayed, or a live cluster",
		Long: `snapshot writes cluster snapshots (a v1 List of nodes, pods, PDBs, ...) that
plan --snapshot and simulate read.`,
		Args: noArgs,
	}
	cmd.AddCommand(newSyntheticCommand(), newOpenbCommand(), newCaptureCommand())
	return cmd
}

func newSyntheticCommand() *cobra.Command {
	var o synthetic.Options
	var usage bool
	var out string
	cmd := &cobra.Command{
		Use:     "synthetic",
		Short:   "Generate a fragmented cluster: heterogeneous pods, owned workloads, PDBs, DaemonSets",
		Example: `  rebalancer snapshot synthetic --nodes 1000 --pods 30000 -o cluster.yaml`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			errs := []error{checkOutput(out)}
			if o.Nodes < 1 || o.Nodes > synthetic.MaxNodes {
				errs = append(errs, fmt.Errorf("--nodes %d: want 1 to %d", o.Nodes, synthetic.MaxNodes))
			}
			if o.Pods < 0 || o.Pods > synthetic.MaxPods {
				errs = append(errs, fmt.Errorf("--pods %d: want 0 to %d", o.Pods, synthetic.MaxPods))
			}
			if o.Gang < 0 || o.Gang > o.Pods {
				errs = append(errs, fmt.Errorf("--gang %d: want 0 to --pods (%d)", o.Gang, o.Pods))
			}
			if err := errors.Join(errs...); err != nil {
				return err
			}
			ctx := cmd.Context()
			klog.FromContext(ctx).Info("Generating the cluster", "nodes", o.Nodes, "pods", o.Pods, "gang", o.Gang, "seed", o.Seed)
			// SIGTERM ends generation (GenerateContext) and writing
			// (writeSnapshot) alike, leaving no file behind.
			snap, err := synthetic.GenerateContext(ctx, o)
			if err != nil {
				return err
			}
			if usage {
				synthetic.Usage(snap, o.Seed, synthetic.SampledAt)
			}
			if err := ctx.Err(); err != nil {
				return context.Cause(ctx)
			}
			return writeSnapshot(cmd, out, snap)
		},
	}
	cmd.Flags().IntVar(&o.Nodes, "nodes", 100, "number of nodes (at most 50000)")
	cmd.Flags().IntVar(&o.Pods, "pods", 3000, "number of pods (at most 1500000)")
	cmd.Flags().Int64Var(&o.Seed, "seed", 1, "random seed; the same seed gives the same cluster")
	cmd.Flags().IntVar(&o.Gang, "gang", 0, "pods of one gang (a Job in namespace ml-training labelled "+gang.PodGroupLabel+"=training), which moves whole or not at all; counted in --pods")
	cmd.Flags().BoolVar(&usage, "usage", false, usageHelp)
	cmd.Flags().StringVarP(&out, "output", "o", "", "snapshot file to write (- for stdout); a name ending in .json is written in JSON, which loads faster, any other in YAML")
	return cmd
}

// usageHelp describes --usage of the generated snapshots (synthetic.Usage).
const usageHelp = "also generate usage (NodeMetrics, PodMetrics) as metrics-server reports it: each workload at 20-100% of its CPU requests, one in 20 hot at 150-250%"

func newOpenbCommand() *cobra.Command {
	var usage bool
	var nodesFile, podsFile, schedulerConfig, schedulerName, out string
	var queueFrom int64
	var o openb.Options
	cmd := &cobra.Command{
		Use:   "openb",
		Short: "Replay the openb trace (node and pod CSV lists) through a scheduler profile into a snapshot",
		Long: `openb replays the pods of an openb pod list (Alibaba's GPU cluster trace) onto the
nodes of a node list, creations and deletions in time order, through a
scheduler profile (kube-scheduler's default unless --scheduler-config), and
writes the cluster that history leaves at --at (default: the first moment
the most pods ran). GPUs become nvidia.com/gpu; gpu_milli (GPU sharing) is
not modelled: a pod holds whole GPUs, as the device plugin allocates them.`,
		Example: `  rebalancer snapshot openb --nodes openb_node_list_all_node.csv \
    --pods openb_pod_list_default.csv -o openb.yaml`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var errs []error
			if nodesFile == "" {
				errs = append(errs, errors.New("--nodes is required"))
			}
			if podsFile == "" {
				errs = append(errs, errors.New("--pods is required"))
			}
			if err := checkOutput(out); err != nil {
				errs = append(errs, err)
			}
			if o.At < openb.Peak {
				errs = append(errs, fmt.Errorf("--at %d: must be a second of the trace (>= 0), or -1 for the peak", o.At))
			}
			if o.GPUSharing && !o.DRA {
				errs = append(errs, errors.New("--gpu-sharing needs --dra: only DRA devices can be shared"))
			}
			if cmd.Flags().Changed("queue-from") {
				switch {
				case queueFrom < 0:
					errs = append(errs, fmt.Errorf("--queue-from %d: must be a second of the trace (>= 0)", queueFrom))
				case o.At != openb.Peak && queueFrom > o.At:
					errs = append(errs, fmt.Errorf("--queue-from %d: after --at %d, it would queue no pod: want 0 to %d", queueFrom, o.At, o.At))
				}
				o.QueueFrom = &queueFrom
			}
			errs = append(errs, checkReadable("nodes", nodesFile), checkReadable("pods", podsFile), checkReadable("scheduler-config", schedulerConfig))
			if schedulerName != "" {
				for _, msg := range validation.IsDNS1123Subdomain(schedulerName) {
					errs = append(errs, fmt.Errorf("--scheduler-name %q: %s", schedulerName, msg))
				}
				// Without a file, the replay's profile is kube-scheduler's
				// default, whose pods name default-scheduler.
				if schedulerConfig == "" && schedulerName != v1.DefaultSchedulerName {
					errs = append(errs, fmt.Errorf("--scheduler-name %q picks a profile of --scheduler-config, which is not given: the pods would be placed by kube-scheduler's default profile and name %s; give the --scheduler-config that has profile %s, or --pod-scheduler-name %s for the pods to name it",
						schedulerName, v1.DefaultSchedulerName, schedulerName, schedulerName))
				}
			}
			if o.SchedulerName != "" {
				for _, msg := range validation.IsDNS1123Subdomain(o.SchedulerName) {
					errs = append(errs, fmt.Errorf("--pod-scheduler-name %q: %s", o.SchedulerName, msg))
				}
			}
			if err := errors.Join(errs...); err != nil {
				return err
			}
			if schedulerConfig != "" {
				_, prof, err := profile.Load(schedulerConfig, schedulerName)
				if err != nil {
					return err
				}
				o.Profile = prof
			}
			nodes, err := readCSV(nodesFile, openb.ReadNodes)
			if err != nil {
				return err
			}
			pods, err := readCSV(podsFile, openb.ReadPods)
			if err != nil {
				return err
			}
			// As after an --at, which is checked before the trace is read.
			if at := openb.SnapshotAt(pods, o); o.QueueFrom != nil && *o.QueueFrom > at {
				return fmt.Errorf("--queue-from %d: after second %d, the trace's peak, which the snapshot shows without --at, it would queue no pod: want 0 to %d, or an --at of %d or later",
					*o.QueueFrom, at, at, *o.QueueFrom)
			}
			klog.FromContext(cmd.Context()).Info("Replaying the trace", "nodes", len(nodes), "pods", len(pods))
			snap, stats, err := openb.Import(cmd.Context(), nodes, pods, o)
			if err != nil {
				return err
			}
			logger := klog.FromContext(cmd.Context())
			logger.Info("Replayed the openb trace", "nodes", len(nodes), "result", stats.String())
			if o.QueueFrom != nil && stats.Queued == 0 {
				logger.Info("Warning: --queue-from queued no pod: no pod of the trace is created from that second to the snapshot's and still there then, so simulate --arrivals has none to let in",
					"queueFrom", *o.QueueFrom, "at", stats.At)
			}
			logger.Info(schedulerNote(o))
			if usage {
				synthetic.Usage(snap, 1, stats.Time())
			}
			return writeSnapshot(cmd, out, snap)
		},
	}
	cmd.Flags().StringVar(&nodesFile, "nodes", "", "node list CSV (sn,cpu_milli,memory_mib,gpu,model)")
	cmd.Flags().StringVar(&podsFile, "pods", "", "pod list CSV (name,cpu_milli,memory_mib,num_gpu,gpu_milli, and optionally gpu_spec,qos,pod_phase,creation_time,deletion_time)")
	cmd.Flags().StringVar(&schedulerConfig, "scheduler-config", "", "KubeSchedulerConfiguration that places the pods (default: kube-scheduler's default profile)")
	cmd.Flags().StringVar(&schedulerName, "scheduler-name", "", "profile of --scheduler-config to use (default: its only profile); without --scheduler-config, only default-scheduler, kube-scheduler's default profile")
	cmd.Flags().StringVar(&o.SchedulerName, "pod-scheduler-name", "", "schedulerName the snapshot's pods carry, placed as they are by the replay's profile: the scheduler that re-places them from now on (default: the replay profile's)")
	cmd.Flags().Int64Var(&o.At, "at", openb.Peak, "second of the trace the snapshot shows; -1 is the first moment the most pods ran")
	cmd.Flags().BoolVar(&o.IgnoreDeletions, "ignore-deletions", false, "keep every pod from its creation on (fills the cluster with the whole trace)")
	cmd.Flags().BoolVar(&o.EveryNode, "every-node", false, everyNodeHelp)
	cmd.Flags().BoolVar(&o.DRA, "dra", false, "GPUs as DRA devices (ResourceSlices, a DeviceClass, claims from templates) instead of the extended resource nvidia.com/gpu")
	cmd.Flags().BoolVar(&o.GPUSharing, "gpu-sharing", false, "with --dra, GPUs several pods share: 1000 milli of capacity each, a pod with gpu_milli under 1000 consumes that much (DRA consumable capacity)")
	cmd.Flags().Int64Var(&queueFrom, "queue-from", 0, "second of the trace from which pods are not replayed but left pending, not yet tried by the scheduler: the queue simulate's --arrivals lets in round by round (default: none)")
	cmd.Flags().BoolVar(&usage, "usage", false, usageHelp)
	cmd.Flags().StringVarP(&out, "output", "o", "", "snapshot file to write (- for stdout); a name ending in .json is written in JSON, which loads faster, any other in YAML")
	return cmd
}

// schedulerNote says which scheduler the imported pods name and what that
// means for plan and simulate.
func schedulerNote(o openb.Options) string {
	name := o.SchedulerName
	if name == "" {
		name = v1.DefaultSchedulerName
		if o.Profile != nil {
			name = o.Profile.SchedulerName
		}
	}
	if name == v1.DefaultSchedulerName {
		return "The snapshot's pods name default-scheduler. plan and simulate model it with kube-scheduler's default profile (unless a --scheduler-config configures it), which follows no rebalance hint: rebalancer then moves only what holds wherever it places a pod. To run the pods on rebalancer-scheduler, write them with --pod-scheduler-name rebalancer-scheduler and give simulate that scheduler's --scheduler-config (docs/schedulers.md)"
	}
	return fmt.Sprintf("The snapshot's pods name %s: give plan and simulate a --scheduler-config with a profile of that name (as policies/binpacking-scheduler.yaml has for rebalancer-scheduler)", name)
}

func readCSV[T any](path string, read func(string, io.Reader) ([]T, error)) ([]T, error) {
	data, err := readfile.Read(path, readfile.CSVLimit)
	if err != nil {
		return nil, err
	}
	return read(path, bytes.NewReader(data))
}

func newCaptureCommand() *cobra.Command {
	var c clientFlags
	var out, policyFile string
	var usageWindow, usageInterval time.Duration
	cmd := &cobra.Command{
		Use:   "capture",
		Short: "Write a live cluster's nodes, pods, PDBs, ... and their usage (metrics.k8s.io, a policy's Prometheus queries) to a snapshot file (read-only)",
		Example: `  rebalancer snapshot capture -o cluster.yaml
  rebalancer snapshot capture --context prod --policy policy.yaml -o cluster.yaml`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			errs := append(c.errors(), checkOutput(out), checkReadable("policy", policyFile))
			if usageWindow < 0 || usageWindow > time.Hour {
				errs = append(errs, fmt.Errorf("--usage-window %s: want 0 to 1h", usageWindow))
			}
			if usageInterval < time.Second || usageInterval > 10*time.Minute {
				errs = append(errs, fmt.Errorf("--usage-interval %s: want 1s to 10m", usageInterval))
			}
			if err := errors.Join(errs...); err != nil {
				return err
			}
			client, err := c.newClient(cmd.Context())
			if err != nil {
				return err
			}
			// As run and plan read the cluster, the usage included, where
			// metrics-server runs: a policy that balances by usage can then
			// be planned offline, over the samples of the window.
			sess := session.New(session.Options{
				Files: inputs.Files{Policy: policyFile}, Client: client, UsageWindow: usageWindow, UsageInterval: usageInterval,
			})
			snap, err := sess.Capture(cmd.Context(), live.Capture)
			if err != nil {
				return err
			}
			return writeSnapshot(cmd, out, snap)
		},
	}
	c.addFlags(cmd.Flags(), "kubeconfig of the cluster to capture "+kubeconfigDefaults)
	cmd.Flags().StringVarP(&out, "output", "o", "", "snapshot file to write (- for stdout); a name ending in .json is written in JSON, which loads faster, any other in YAML")
	cmd.Flags().StringVar(&policyFile, "policy", "", "DeschedulerPolicy file whose Prometheus queries (LowNodeUtilization metricsUtilization) to ask the cluster's Prometheus and record")
	cmd.Flags().DurationVar(&usageWindow, "usage-window", 0, "sample metrics.k8s.io's usage for this long and record every node's samples (plan's --usage-window then takes the least); 0 records one sample")
	cmd.Flags().DurationVar(&usageInterval, "usage-interval", 15*time.Second, "how often to sample the usage over --usage-window")
	return cmd
}

// writeSnapshot writes to a temporary file renamed into place, so a failed
// or interrupted write never leaves a truncated snapshot behind; in the
// format its name asks for (snapshot.EncodeAs), stdout in YAML.
func writeSnapshot(cmd *cobra.Command, path string, snap *snapshot.Snapshot) error {
	ctx := cmd.Context()
	if path == "-" {
		return snap.Encode(ctxWriter{ctx, cmd.OutOrStdout()})
	}
	encode := func(w io.Writer) error { return snap.EncodeAs(path, ctxWriter{ctx, w}) }
	return writeAtomically(path, encode, func() {
		klog.FromContext(cmd.Context()).Info("Wrote snapshot", "file", path, "snapshot", snap.String())
	})
}

// ctxWriter fails every write once ctx ends, with its cause: the
// encoder stops at the first, and a file being written is removed.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(b []byte) (int, error) {
	if c.ctx != nil && c.ctx.Err() != nil {
		return 0, context.Cause(c.ctx)
	}
	return c.w.Write(b)
}

func writeAtomically(path string, write func(io.Writer) error, done func()) error {
	tmp, err := createBeside(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, unwrapPath(err))
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	if err := write(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("%s: %w", path, unwrapPath(err))
	}
	if done != nil {
		done()
	}
	return nil
}

// createBeside creates a new file in path's directory to be renamed to path,
// with the mode a file the shell creates gets (0666 less the umask:
// os.CreateTemp's 0600 would keep a report or snapshot from its readers).
func createBeside(path string) (*os.File, error) {
	for {
		name := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
}

// checkOutput checks the --output of a snapshot command before any work.
func checkOutput(out string) error {
	switch out {
	case "":
		return errors.New("--output is required (- for stdout)")
	case "-":
		return nil
	}
	if err := checkWritable(out); err != nil {
		return fmt.Errorf("--output %w", err)
	}
	return nil
}

// checkReadable checks, before anything connects or any work is done, that
// the file a flag names can be opened; nil for no file or standard input.
func checkReadable(flag, path string) error {
	if path == "" || path == "-" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("--%s %s: %w", flag, path, unwrapPath(err))
	}
	return f.Close()
}

// checkWritable checks, before any work is done, that a file can be written
// at path: its directory exists and takes a new file.
func checkWritable(path string) error {
	dir := filepath.Dir(path)
	info, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("%s: directory %s: %w", path, dir, unwrapPath(err))
	case !info.IsDir():
		return fmt.Errorf("%s: %s is not a directory", path, dir)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("%s: cannot write in %s: %w", path, dir, unwrapPath(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// unwrapPath drops the path an fs.PathError repeats (a temporary name).
func unwrapPath(err error) error {
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return pathErr.Err
	}
	return err
}
