package serving

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

const (
	// clockSkew is how far a certificate's NotBefore may be ahead of this
	// clock: another machine's clock issued it.
	clockSkew = 5 * time.Minute
	// expiryWarning is how close to its expiry a served certificate is
	// warned about: cert-manager renews at two thirds of its lifetime, a
	// week before, so a certificate still this close was not renewed.
	expiryWarning = 7 * 24 * time.Hour
)

// leaf parses the certificate a key pair serves.
func leaf(certPEM, keyPEM []byte) (*x509.Certificate, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	if len(pair.Certificate) == 0 {
		return nil, errors.New("no certificate")
	}
	return x509.ParseCertificate(pair.Certificate[0])
}

// checkValidity refuses a certificate that has expired or is not valid yet:
// a server started with one would fail every handshake, and behind a
// webhook with failurePolicy Ignore, or an ignorable extender, nobody would
// notice.
func checkValidity(cert *x509.Certificate, now time.Time) error {
	switch {
	case now.After(cert.NotAfter):
		return fmt.Errorf("expired at %s (%s ago)", cert.NotAfter.UTC().Format(time.RFC3339), now.Sub(cert.NotAfter).Round(time.Second))
	case now.Add(clockSkew).Before(cert.NotBefore):
		return fmt.Errorf("not valid before %s (in %s)", cert.NotBefore.UTC().Format(time.RFC3339), cert.NotBefore.Sub(now).Round(time.Second))
	}
	return nil
}

// certWatch reports on the certificate served, at start and on every
// reload: its expiry as a metric, a warning within expiryWarning of it, an
// error once it is past. An expired certificate reloaded is still served:
// the previous one expires no later, and the warnings said so a week ahead.
type certWatch struct {
	logger  klog.Logger
	file    string
	current func() (certPEM, keyPEM []byte)
	expiry  prometheus.Gauge
	now     func() time.Time
}

func newCertWatch(logger klog.Logger, file string, current func() ([]byte, []byte), reg prometheus.Registerer) *certWatch {
	w := &certWatch{logger: logger, file: file, current: current, now: time.Now,
		expiry: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "rebalancer", Subsystem: "serving", Name: "certificate_expiry_timestamp_seconds",
			Help: "When the serving certificate (--tls-cert-file) expires, as Unix seconds; updated when it is reloaded.",
		})}
	if reg != nil {
		reg.MustRegister(w.expiry)
	}
	return w
}

// Enqueue is called when the files are reloaded (dynamiccertificates.Listener).
func (w *certWatch) Enqueue() { w.check() }

func (w *certWatch) check() {
	cert, err := leaf(w.current())
	if err != nil {
		w.logger.Error(err, "Cannot read the serving certificate", "file", w.file)
		return
	}
	w.expiry.Set(float64(cert.NotAfter.Unix()))
	now := w.now()
	left := cert.NotAfter.Sub(now)
	switch {
	case checkValidity(cert, now) != nil:
		w.logger.Error(checkValidity(cert, now), "The serving certificate is not valid: clients will refuse it", "file", w.file, "notBefore", cert.NotBefore, "notAfter", cert.NotAfter)
	case left < expiryWarning:
		w.logger.Info("Warning: the serving certificate expires soon and has not been renewed", "file", w.file, "notAfter", cert.NotAfter, "left", left.Round(time.Minute))
	default:
		w.logger.V(2).Info("Serving certificate", "file", w.file, "notAfter", cert.NotAfter)
	}
}
