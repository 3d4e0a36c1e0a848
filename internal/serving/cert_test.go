package serving

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/rebalancer-dev/rebalancer/internal/testcert"
)

// writeCert writes a self-signed serving certificate valid from notBefore
// to notAfter, and its key.
func writeCert(t *testing.T, dir string, notBefore, notAfter time.Time) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile, _ = testcert.WriteValid(t, dir, notBefore, notAfter)
	return certFile, keyFile
}

// TestCertificateValidity: a server does not start with a certificate that
// has expired or is not valid yet (beyond the clock skew), naming the file
// and the time; one valid now starts, its expiry is a metric, and within a
// week of it a warning is logged.
func TestCertificateValidity(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name                string
		notBefore, notAfter time.Time
		refused             string // "" starts
		warned              bool
	}{
		{"expired years ago", now.Add(-3 * 365 * 24 * time.Hour), now.Add(-2 * 365 * 24 * time.Hour), "expired at", false},
		{"expired a minute ago", now.Add(-24 * time.Hour), now.Add(-time.Minute), "expired at", false},
		{"valid tomorrow", now.Add(24 * time.Hour), now.Add(48 * time.Hour), "not valid before", false},
		{"valid in a minute (clock skew)", now.Add(time.Minute), now.Add(365 * 24 * time.Hour), "", false},
		{"3 days left", now.Add(-time.Hour), now.Add(3 * 24 * time.Hour), "", true},
		{"a year left", now.Add(-time.Hour), now.Add(365 * 24 * time.Hour), "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cert, key := writeCert(t, t.TempDir(), c.notBefore, c.notAfter)
			reg := prometheus.NewRegistry()
			o := Options{Address: freeAddress(t), CertFile: cert, KeyFile: key, Metrics: reg}
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
			defer cancel()
			done, err := Serve(ctx, o, nil)
			if c.refused != "" {
				if err == nil || !strings.Contains(err.Error(), "--tls-cert-file "+cert) || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("Serve: %v, want a refusal naming %s and saying %q", err, cert, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
			}()
			got, err := testutil.GatherAndCount(reg, "rebalancer_serving_certificate_expiry_timestamp_seconds")
			if err != nil || got != 1 {
				t.Fatalf("the expiry metric: %d series, %v", got, err)
			}
			mfs, _ := reg.Gather()
			if v := mfs[0].GetMetric()[0].GetGauge().GetValue(); int64(v) != c.notAfter.Unix() {
				t.Errorf("expiry metric %v, want %d", v, c.notAfter.Unix())
			}
			warned := strings.Contains(logger.GetSink().(ktesting.Underlier).GetBuffer().String(), "expires soon")
			if warned != c.warned {
				t.Errorf("warned %v, want %v", warned, c.warned)
			}
		})
	}
}

// TestReloadedCertificate: a certificate replaced on disk (a renewal) is
// reported when it is reloaded: the expiry metric follows it, and one
// that has expired is logged as an error.
func TestReloadedCertificate(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	cert, key := writeCert(t, dir, now.Add(-time.Hour), now.Add(30*24*time.Hour))
	reg := prometheus.NewRegistry()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	done, err := Serve(ctx, Options{Address: freeAddress(t), CertFile: cert, KeyFile: key, Metrics: reg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	expiry := func() int64 {
		mfs, err := reg.Gather()
		if err != nil || len(mfs) != 1 {
			t.Fatalf("metrics: %v %v", mfs, err)
		}
		return int64(mfs[0].GetMetric()[0].GetGauge().GetValue())
	}
	for _, notAfter := range []time.Time{now.Add(90 * 24 * time.Hour), now.Add(-time.Minute)} {
		time.Sleep(1100 * time.Millisecond) // a new modification time
		writeCert(t, dir, now.Add(-2*time.Hour), notAfter)
		deadline := time.Now().Add(30 * time.Second)
		for expiry() != notAfter.Unix() {
			if time.Now().After(deadline) {
				t.Fatalf("the expiry metric stayed at %d after the certificate was replaced by one expiring at %d", expiry(), notAfter.Unix())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String(); !strings.Contains(logs, "The serving certificate is not valid") || !strings.Contains(logs, "expired at") {
		t.Errorf("an expired certificate reloaded was not logged as an error:\n%s", logs)
	}
}
