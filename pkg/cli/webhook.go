package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/rebalancer-dev/rebalancer/internal/serving"
	"github.com/rebalancer-dev/rebalancer/pkg/webhook"
)

type webhookOptions struct {
	serving   serving.Options
	scheduler string
}

func newWebhookCommand() *cobra.Command {
	o := &webhookOptions{}
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Serve the admission webhook that puts opted-in namespaces' new pods on rebalancer-scheduler",
		Long: `webhook serves a mutating admission webhook (AdmissionReview v1, POST /mutate)
for clusters whose kube-scheduler cannot be configured. A new pod that names no
scheduler or default-scheduler is given --scheduler-name, unless it is labelled
rebalancer.dev/scheduler=disabled; the API server sends only the pods of
namespaces labelled rebalancer.dev/scheduler=enabled (manifests/webhook). Every
pod is admitted: one the webhook cannot read is left unchanged. It needs no
access to the API server. TLS is required, as the API server calls webhooks
over HTTPS; the certificate is reloaded when it changes. /healthz, /readyz and
/metrics are served on the same address.`,
		Example: `  rebalancer webhook --tls-cert-file /tls/tls.crt --tls-private-key-file /tls/tls.key`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var errs []error
			if err := o.serving.Validate(); err != nil {
				errs = append(errs, err)
			}
			if o.serving.CertFile == "" {
				errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file: required, the API server calls webhooks over HTTPS"))
			}
			for _, msg := range validation.IsDNS1123Subdomain(o.scheduler) {
				errs = append(errs, fmt.Errorf("--scheduler-name %q: %s", o.scheduler, msg))
			}
			if err := errors.Join(errs...); err != nil {
				return err
			}
			return webhook.Run(cmd.Context(), webhook.Options{Serving: o.serving, Scheduler: o.scheduler})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.serving.Address, "bind-address", ":8443", "address of the webhook (POST /mutate), /healthz, /readyz and /metrics")
	f.StringVar(&o.serving.CertFile, "tls-cert-file", "", "serving certificate (PEM; reloaded when it changes), e.g. from a cert-manager Secret")
	f.StringVar(&o.serving.KeyFile, "tls-private-key-file", "", "private key of --tls-cert-file (PEM)")
	f.StringVar(&o.scheduler, "scheduler-name", "rebalancer-scheduler", "schedulerName given to the opted-in pods")
	return cmd
}
