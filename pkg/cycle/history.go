package cycle

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/rebalancer-dev/rebalancer/pkg/history"
)

// readHistory reads the history for a dry-run (Options.ReadHistory).
func (o Options) readHistory(ctx context.Context, moves *history.History) (*history.History, error) {
	if o.ReadHistory != nil {
		return o.ReadHistory(ctx, moves)
	}
	return moves, moves.Load(ctx)
}

// checkHistoryWritable makes sure, before anything is evicted, that the
// move history can be kept in the ConfigMap configMap (namespace/name; ""
// keeps none): a history that cannot be written after the evictions would
// let the next run move the same pods again. On a fresh cluster the
// namespace may not exist yet; the API server's dry-run of creating the
// ConfigMap tells, with the rights the rebalancer runs with, and writes
// nothing.
func checkHistoryWritable(ctx context.Context, client kubernetes.Interface, configMap string) error {
	if configMap == "" {
		return nil
	}
	ns, name, _ := strings.Cut(configMap, "/") // validated
	configMaps := client.CoreV1().ConfigMaps(ns)
	if _, err := configMaps.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return nil // there, or unreadable: loading it says so
	}
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	_, err := configMaps.Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("--history-configmap %s: namespace %q does not exist, so the moves made could not be kept: create it (kubectl create namespace %s; manifests/ and the chart do), name a ConfigMap in a namespace that exists, or give --history-configmap \"\" to keep moves in memory only (the cooldown then does not hold across runs)", configMap, ns, ns)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("--history-configmap %s: the rebalancer may not create its move history there (it needs create, get and update of ConfigMaps in %s, as manifests/rebalancer grants in its own namespace): %w", configMap, ns, err)
	default:
		return fmt.Errorf("--history-configmap %s: %w", configMap, err)
	}
}
