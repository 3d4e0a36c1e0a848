//go:build e2e

package e2e

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// faultProxy is a reverse proxy on loopback in front of kube-apiserver that
// fails chosen requests: an error status, a delay, or a dropped connection,
// before or after the request reached the apiserver. Clients reach it
// through its own kubeconfig (TLS with the proxy's certificate); it talks to
// the apiserver as the admin.
type faultProxy struct {
	t   *testing.T
	srv *httptest.Server
	// Kubeconfig points at the proxy.
	Kubeconfig string

	mu     sync.Mutex
	faults []*fault
	seen   []proxied
}

// fault is one kind of failure for requests that match.
type fault struct {
	name  string
	match func(r *http.Request) bool
	// times is how many matching requests fail; 0 means all of them.
	times int
	// status answers with this code instead of forwarding (429, 500, ...).
	status int
	// delay holds the request this long before forwarding it.
	delay time.Duration
	// drop closes the connection without an answer; with afterForward the
	// request reaches the apiserver first, so it happens but the client
	// never learns.
	drop, afterForward bool

	injected int
}

// proxied records one request that reached the proxy.
type proxied struct {
	at     time.Time
	method string
	path   string
	query  string
	fault  string // "" if forwarded untouched
}

func newFaultProxy(t *testing.T) *faultProxy {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{t: t}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream
	rp.ErrorLog = nil
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := p.pick(r)
		if f == nil {
			rp.ServeHTTP(w, r)
			return
		}
		if f.delay > 0 {
			time.Sleep(f.delay)
		}
		switch {
		case f.status != 0:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(f.status)
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected by the test proxy: %s","code":%d}`, f.name, f.status)
		case f.drop && f.afterForward:
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			hangUp(w)
		case f.drop:
			hangUp(w)
		default:
			rp.ServeHTTP(w, r)
		}
	}))
	p.srv.StartTLS()
	t.Cleanup(p.srv.Close)

	// A kubeconfig that trusts the proxy's certificate.
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.srv.URL, CertificateAuthorityData: ca}
	kc.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	kc.CurrentContext = "proxy"
	p.Kubeconfig = filepath.Join(t.TempDir(), "proxy.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	return p
}

// hangUp closes the client's connection without a response.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// inject adds faults; the first matching fault with failures left applies.
func (p *faultProxy) inject(fs ...*fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = append(p.faults, fs...)
}

// clear removes every fault.
func (p *faultProxy) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = nil
}

func (p *faultProxy) pick(r *http.Request) *fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	rec := proxied{at: time.Now(), method: r.Method, path: r.URL.Path, query: r.URL.RawQuery}
	defer func() { p.seen = append(p.seen, rec) }()
	for _, f := range p.faults {
		if (f.times == 0 || f.injected < f.times) && f.match(r) {
			f.injected++
			rec.fault = f.name
			return f
		}
	}
	return nil
}

// requests returns what reached the proxy so far.
func (p *faultProxy) requests() []proxied {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]proxied(nil), p.seen...)
}

// checkInjected fails the test for a fault that never fired: the test would
// prove nothing about it.
func (p *faultProxy) checkInjected() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.faults {
		if f.injected == 0 || (f.times > 0 && f.injected < f.times) {
			p.t.Errorf("fault %q fired %d times, want %d", f.name, f.injected, f.times)
		}
	}
}

// Request matchers.
func isEviction(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/eviction")
}

func isPodPatch(r *http.Request) bool {
	return r.Method == http.MethodPatch && strings.Contains(r.URL.Path, "/pods/")
}

func isNodePatch(r *http.Request) bool {
	return r.Method == http.MethodPatch && strings.HasPrefix(r.URL.Path, "/api/v1/nodes/")
}

// isPodRead matches the pod LIST and WATCH requests of an informer (with
// client-go's WatchListClient the initial list is a watch too).
func isPodRead(r *http.Request) bool {
	return r.Method == http.MethodGet && r.URL.Path == "/api/v1/pods"
}
