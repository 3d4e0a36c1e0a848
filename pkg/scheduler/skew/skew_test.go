package skew

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		server, built string
		want          string // a part of the error; "" for none
	}{
		{"v1.36.1", "v1.36.1", ""},
		{"v1.36.0", "v1.36.1", ""}, // patches do not count
		{"v1.37.2", "v1.36.1", ""},
		{"v1.37.0-rc.1+abc", "v1.36.1", ""},
		{"v1.35.4", "v1.36.1", "kube-apiserver v1.35.4 is older than rebalancer-scheduler's Kubernetes v1.36.1"},
		{"v1.38.0", "v1.36.1", "more than one minor newer"},
		{"v2.36.0", "v1.36.1", "differ in their major version"},
		{"not-a-version", "v1.36.1", `the API server's version "not-a-version"`},
	} {
		err := check(tc.server, tc.built)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Check(%s, %s) = %v, want %q", tc.server, tc.built, err, tc.want)
		}
	}
}

type fakeServer struct {
	v     string
	err   error
	calls int
}

func (f *fakeServer) ServerVersion() (*version.Info, error) {
	f.calls++
	return &version.Info{GitVersion: f.v}, f.err
}

func TestOnceAsksOnce(t *testing.T) {
	old := &fakeServer{v: "v1.35.0"}
	var o Once
	for range 3 {
		if err := o.check(context.Background(), old, "v1.36.1"); err == nil || !strings.Contains(err.Error(), "older") {
			t.Fatalf("check = %v, want the skew refused", err)
		}
	}
	if old.calls != 1 {
		t.Errorf("asked the server %d times, want once", old.calls)
	}
	var lenient Once
	if err := lenient.check(context.Background(), &fakeServer{err: errors.New("connection refused")}, "v1.36.1"); err != nil {
		t.Errorf("a server that cannot be asked: %v, want a warning only", err)
	}
}
