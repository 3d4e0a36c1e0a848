package extender

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	restclient "k8s.io/client-go/rest"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// defaultTimeout is kube-scheduler's extender httpTimeout when unset.
const defaultTimeout = 5 * time.Second

// Probe asks the extender a configuration lists to prioritize a probe pod,
// over the transport kube-scheduler builds from the same configuration
// (TLS, timeout). It fails unless rebalancer's extender answers: up, its
// pod watch synced, and naming itself in its response.
func Probe(ctx context.Context, cfg config.Extender) error {
	transport, err := transportFor(cfg)
	if err != nil {
		return err
	}
	timeout := cfg.HTTPTimeout.Duration
	if timeout == 0 {
		timeout = defaultTimeout
	}
	client := &http.Client{Transport: transport, Timeout: timeout}
	defer client.CloseIdleConnections()
	nodes := []string{}
	body, err := json.Marshal(extenderv1.ExtenderArgs{
		Pod:       &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rebalancer-probe", Namespace: metav1.NamespaceDefault}},
		NodeNames: &nodes,
	})
	if err != nil {
		return err
	}
	url := strings.TrimRight(cfg.URLPrefix, "/") + "/" + cfg.PrioritizeVerb
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, strings.TrimSpace(string(msg)))
	}
	if resp.Header.Get(header) == "" {
		return fmt.Errorf("POST %s answers without the %s header: it is not rebalancer's extender", url, header)
	}
	var list extenderv1.HostPriorityList
	if err := json.Unmarshal(msg, &list); err != nil {
		return fmt.Errorf("POST %s: the answer is not a HostPriorityList: %w", url, err)
	}
	return nil
}

// transportFor builds the transport kube-scheduler's HTTPExtender uses for
// cfg: its TLS settings, and HTTPS without a CA is not verified.
func transportFor(cfg config.Extender) (http.RoundTripper, error) {
	var rc restclient.Config
	if t := cfg.TLSConfig; t != nil {
		rc.TLSClientConfig = restclient.TLSClientConfig{
			Insecure: t.Insecure, ServerName: t.ServerName,
			CertFile: t.CertFile, KeyFile: t.KeyFile, CAFile: t.CAFile,
			CertData: t.CertData, KeyData: t.KeyData, CAData: t.CAData,
		}
	}
	if cfg.EnableHTTPS && len(rc.CAFile) == 0 && len(rc.CAData) == 0 {
		rc.Insecure = true
	}
	tlsConfig, err := restclient.TLSConfigFor(&rc)
	if err != nil {
		return nil, fmt.Errorf("TLS settings: %w", err)
	}
	return utilnet.SetTransportDefaults(&http.Transport{TLSClientConfig: tlsConfig}), nil
}
