// Package serving runs the HTTP(S) servers of rebalancer's long-lived
// endpoints (the scheduler extender, the admission webhook): plain HTTP, or
// TLS from a certificate and key file that are reloaded when they change on
// disk, as cert-manager rotates a mounted Secret.
package serving

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/klog/v2"
)

// Options say where and how to serve.
type Options struct {
	// Address is host:port to listen on.
	Address string
	// CertFile and KeyFile: both set serves TLS, both empty plain HTTP.
	CertFile, KeyFile string
	// Metrics, when set, gets the certificate's expiry
	// (rebalancer_serving_certificate_expiry_timestamp_seconds).
	Metrics prometheus.Registerer
}

// Validate names the flag that is wrong.
func (o Options) Validate() error {
	if err := CheckAddress(o.Address); err != nil {
		return fmt.Errorf("--bind-address %q: %w", o.Address, err)
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return errors.New("--tls-cert-file and --tls-private-key-file: give both to serve TLS, or neither to serve plain HTTP")
	}
	if o.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return fmt.Errorf("--tls-cert-file %s, --tls-private-key-file %s: %w", o.CertFile, o.KeyFile, err)
		}
		cert, err := x509.ParseCertificate(pair.Certificate[0])
		if err == nil {
			err = checkValidity(cert, time.Now())
		}
		if err != nil {
			return fmt.Errorf("--tls-cert-file %s: %w", o.CertFile, err)
		}
	}
	return nil
}

// CheckAddress checks a host:port to listen on.
func CheckAddress(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q: want a number from 0 to 65535", port)
	}
	return nil
}

// Probes are the health, readiness and metrics endpoints every long-lived
// part of rebalancer serves beside its own handlers.
type Probes struct {
	// Healthy checks /healthz (e.g. leader election's watchdog); nil is
	// always healthy.
	Healthy func(*http.Request) error
	// Ready reports readiness for /readyz, NotReady saying why not; nil is
	// always ready.
	Ready    func() bool
	NotReady string
	// Metrics is served at /metrics; nil serves no /metrics.
	Metrics prometheus.Gatherer
}

// Register adds /healthz, /readyz and, with Metrics, /metrics to mux.
func (p Probes) Register(mux *http.ServeMux) {
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if p.Healthy != nil {
			if err := p.Healthy(r); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		_, _ = fmt.Fprint(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if p.Ready != nil && !p.Ready() {
			http.Error(w, "not ready: "+p.NotReady, http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprint(w, "ok")
	})
	if p.Metrics != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(p.Metrics, promhttp.HandlerOpts{}))
	}
}

// ReadBody reads a request body that should hold want (e.g. "an
// AdmissionReview"): a body over the handler's http.MaxBytesReader limit or
// an empty one is an error saying so.
func ReadBody(r io.Reader, want string) ([]byte, error) {
	body, err := io.ReadAll(r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &TooLargeError{Limit: tooBig.Limit}
		}
		return nil, fmt.Errorf("reading the request body: %w", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, fmt.Errorf("empty request body: want %s", want)
	}
	return body, nil
}

// Serve listens and serves handler until ctx ends, then shuts down
// gracefully; done yields nil after that, or the error that stopped the
// server early. A listen or certificate problem is returned before serving.
func Serve(ctx context.Context, o Options, handler http.Handler) (<-chan error, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx)
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	if o.CertFile != "" {
		content, err := dynamiccertificates.NewDynamicServingContentFromFiles("serving", o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert-file %s, --tls-private-key-file %s: %w", o.CertFile, o.KeyFile, err)
		}
		watch := newCertWatch(logger, o.CertFile, content.CurrentCertKeyContent, o.Metrics)
		content.AddListener(watch)
		watch.check()
		go content.Run(ctx, 1)
		srv.TLSConfig = &tls.Config{
			MinVersion: tls.VersionTLS12,
			// The pair is re-read when the files change; clients keep
			// connections alive, so handshakes are rare.
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				certPEM, keyPEM := content.CurrentCertKeyContent()
				cert, err := tls.X509KeyPair(certPEM, keyPEM)
				return &cert, err
			},
		}
	}
	l, err := net.Listen("tcp", o.Address)
	if err != nil {
		return nil, fmt.Errorf("--bind-address %s: %w", o.Address, err)
	}
	if srv.TLSConfig != nil {
		l = tls.NewListener(l, srv.TLSConfig)
	}
	logger.Info("Serving", "address", l.Addr().String(), "tls", srv.TLSConfig != nil)
	done, shutDown := make(chan error, 1), make(chan struct{})
	go func() {
		err := srv.Serve(l)
		if errors.Is(err, http.ErrServerClosed) {
			// Reported once the requests in flight are answered.
			<-shutDown
			err = nil
		}
		done <- err
	}()
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
		close(shutDown)
	}()
	return done, nil
}
