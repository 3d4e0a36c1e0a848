package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rebalancer-dev/rebalancer/internal/serving"
	"github.com/rebalancer-dev/rebalancer/pkg/extender"
	"github.com/rebalancer-dev/rebalancer/pkg/hint"
)

type extenderOptions struct {
	clientFlags
	serving        serving.Options
	hintTTL        time.Duration
	followRollouts bool
}

func newExtenderCommand() *cobra.Command {
	o := &extenderOptions{}
	cmd := &cobra.Command{
		Use:   "extender",
		Short: "Serve the kube-scheduler extender that steers default-scheduler's replacements to their planned nodes",
		Long: `extender serves kube-scheduler's extender API for a scheduler whose plugins
cannot be changed, such as the cluster's default-scheduler. When a pod that
rebalancer evicted with a hint leaves, the extender's pod watch remembers its
owner; its prioritize verb (POST /prioritize) then scores the planned target
of the owner's replacement 10, the node it left 0, and every other node 5,
and every node 5 for pods without a hint. A sticky Deployment's rolling
update (and with --follow-rollouts every Deployment's) has its new pods
scored onto the nodes of the old pods they replace. Add it to the scheduler's
configuration with policies/default-scheduler-extender.yaml. /healthz, /readyz
(ready once the pod watch has synced) and /metrics are served on the same
address.`,
		Example: `  rebalancer extender --bind-address :8888
  rebalancer extender --bind-address :8443 --tls-cert-file /tls/tls.crt --tls-private-key-file /tls/tls.key`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			errs := o.errors()
			if err := o.serving.Validate(); err != nil {
				errs = append(errs, err)
			}
			if err := hint.ValidateTTL(o.hintTTL); err != nil {
				errs = append(errs, fmt.Errorf("--hint-ttl: %w", err))
			}
			if err := errors.Join(errs...); err != nil {
				return err
			}
			client, err := o.newClient(cmd.Context())
			if err != nil {
				return err
			}
			return extender.Run(cmd.Context(), extender.Options{Client: client, Serving: o.serving, HintTTL: o.hintTTL, FollowRollouts: o.followRollouts})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.serving.Address, "bind-address", ":8888", "address of the prioritize verb, /healthz, /readyz and /metrics")
	f.StringVar(&o.serving.CertFile, "tls-cert-file", "", "serve HTTPS with this certificate (PEM; reloaded when it changes); with --tls-private-key-file")
	f.StringVar(&o.serving.KeyFile, "tls-private-key-file", "", "private key of --tls-cert-file (PEM)")
	f.DurationVar(&o.hintTTL, "hint-ttl", hint.DefaultTTL, "how long a hint steers its owner's replacement after its pod is seen leaving (as RebalanceHint's hintTTL)")
	f.BoolVar(&o.followRollouts, "follow-rollouts", false, "score every Deployment's rolling update onto the nodes of the pods it replaces, as sticky Deployments' always are, so a rollout keeps the placement rebalancer made")
	o.addFlags(f, kubeconfigHelp)
	return cmd
}
