// Package skew holds rebalancer-scheduler to kube-scheduler's version skew
// policy: a kube-scheduler may be older than the kube-apiserver it talks to
// by one minor, never newer. A scheduler newer than its API server asks for
// APIs and fields the server does not serve, and fails later in ways that
// do not name the cause; this refuses it at start, naming both versions.
package skew

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// check says whether a scheduler built from Kubernetes built may run
// against an API server at version server: the same minor, or a server up
// to one minor newer.
func check(server, built string) error {
	s, err := utilversion.ParseGeneric(server)
	if err != nil {
		return fmt.Errorf("the API server's version %q: %w", server, err)
	}
	b, err := utilversion.ParseGeneric(built)
	if err != nil {
		return fmt.Errorf("rebalancer-scheduler's Kubernetes version %q: %w", built, err)
	}
	switch {
	case s.Major() != b.Major():
		return fmt.Errorf("kube-apiserver %s and rebalancer-scheduler's Kubernetes %s differ in their major version", server, built)
	case s.Minor() < b.Minor():
		return fmt.Errorf("kube-apiserver %s is older than rebalancer-scheduler's Kubernetes %s: kube-scheduler's version skew policy needs an API server of %d.%d or newer; upgrade the control plane, or steer default-scheduler with rebalancer's extender instead (docs/compatibility.md)",
			server, built, b.Major(), b.Minor())
	case s.Minor() > b.Minor()+1:
		return fmt.Errorf("kube-apiserver %s is more than one minor newer than rebalancer-scheduler's Kubernetes %s: kube-scheduler's version skew policy allows one; run a newer rebalancer-scheduler release",
			server, built)
	}
	return nil
}

// Checked wraps a plugin factory so that the first plugin built asks the
// API server its version and fails with Check's error when the two may not
// run together; rebalancer-scheduler then stops at start, saying why.
func Checked(factory frameworkruntime.PluginFactory, built string, once *Once) frameworkruntime.PluginFactory {
	return func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		if err := once.check(ctx, h.ClientSet().Discovery(), built); err != nil {
			return nil, err
		}
		return factory(ctx, args, h)
	}
}

// Once asks the server once for every plugin and profile.
type Once struct {
	once sync.Once
	err  error
}

// check runs Check once. A server that does not say its version is let
// be, with a warning: a passing network fault must not stop a scheduler.
func (o *Once) check(ctx context.Context, d discovery.ServerVersionInterface, built string) error {
	o.once.Do(func() {
		v, err := d.ServerVersion()
		if err != nil {
			klog.FromContext(ctx).Info("Warning: cannot read the API server's version to check the version skew", "err", err.Error())
			return
		}
		o.err = check(v.GitVersion, built)
	})
	return o.err
}
