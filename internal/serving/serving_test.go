package serving

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/rebalancer-dev/rebalancer/internal/testcert"
)

func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestServeTLS(t *testing.T) {
	cert, key, _ := testcert.Write(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	addr := freeAddress(t)
	done, err := Serve(ctx, Options{Address: addr, CertFile: cert, KeyFile: key}, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a self-signed test certificate
	resp, err := client.Get("https://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.TLS == nil || string(body) != "ok" {
		t.Fatalf("TLS %v, body %q", resp.TLS != nil, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	cert, _, _ := testcert.Write(t, dir)
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Address: "localhost"}, "missing port"},
		{Options{Address: ":99999"}, "from 0 to 65535"},
		{Options{Address: ":8443", CertFile: cert}, "give both"},
		{Options{Address: ":8443", CertFile: cert, KeyFile: cert}, "--tls-private-key-file " + cert},
	} {
		if err := c.o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
}
