// Package fakewatch closes a gap in client-go's fake clientset for tests
// that drive informers: a delete made after an informer's List but before
// its Watch is registered is never delivered (the fake tracker replays only
// objects that still exist), so a test must wait for the watch itself, not
// only for the cache to sync.
package fakewatch

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// Started returns a channel closed once a watch of resource (for example
// "pods") is registered with client's tracker. Call it before the informer
// factory starts.
func Started(client *fake.Clientset, resource string) <-chan struct{} {
	started := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor(resource, func(a clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if w, ok := a.(clienttesting.WatchActionImpl); ok {
			opts = w.ListOptions
		}
		w, err := client.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		once.Do(func() { close(started) })
		return true, w, nil
	})
	return started
}
