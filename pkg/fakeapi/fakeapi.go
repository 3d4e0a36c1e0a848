// Package fakeapi serves a snapshot through a fake clientset, for code that
// reads the cluster through the API: the descheduler, the scheduler
// framework's informers, policy loading (its PriorityClass names). It
// depends on the snapshot format alone, so loaders need not pull in the
// simulator to have one.
package fakeapi

import (
	"fmt"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// Clientset is a fake clientset serving every object of snap. Objects are
// added one by one: the fake's constructor panics on an object it cannot
// store.
func Clientset(snap *snapshot.Snapshot) (*fake.Clientset, error) {
	client := fake.NewClientset()
	for _, o := range snap.Objects() {
		if err := client.Tracker().Add(o); err != nil {
			return nil, fmt.Errorf("seeding the fake API with %T: %w", o, err)
		}
	}
	return client, nil
}
