package fakewatch

import (
	"sync"

	"k8s.io/client-go/tools/cache"
)

// Gate pauses the informer event handlers it wraps, and only those: a test
// holds it (Lock) to make them lag behind their informer's store, as the
// handlers of a loaded process may, each running in its own goroutine, and
// releases it (Unlock) to let them catch up, in order.
type Gate struct{ mu sync.RWMutex }

// Lock holds the gate: the wrapped handlers wait.
func (g *Gate) Lock() { g.mu.Lock() }

// Unlock releases the gate.
func (g *Gate) Unlock() { g.mu.Unlock() }

// Handler wraps h so that each of its calls waits while the gate is held.
func (g *Gate) Handler(h cache.ResourceEventHandler) cache.ResourceEventHandler {
	return gated{h, g}
}

type gated struct {
	cache.ResourceEventHandler
	g *Gate
}

func (h gated) OnAdd(obj any, initial bool) {
	h.g.mu.RLock()
	defer h.g.mu.RUnlock()
	h.ResourceEventHandler.OnAdd(obj, initial)
}

func (h gated) OnUpdate(oldObj, newObj any) {
	h.g.mu.RLock()
	defer h.g.mu.RUnlock()
	h.ResourceEventHandler.OnUpdate(oldObj, newObj)
}

func (h gated) OnDelete(obj any) {
	h.g.mu.RLock()
	defer h.g.mu.RUnlock()
	h.ResourceEventHandler.OnDelete(obj)
}
