package profile_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rebalancer-dev/rebalancer/pkg/profile"
)

// extenderConfig is policies/default-scheduler-extender.yaml, rebalancer's
// extender as shipped.
func extenderConfig(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../policies/default-scheduler-extender.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

const shippedURL = "urlPrefix: http://rebalancer-extender.rebalancer-system.svc:8888"

// refused loads config and checks the error is one line starting with the
// file's path, holding every want and none of dontWant.
func refused(t *testing.T, config string, want []string, dontWant ...string) {
	t.Helper()
	path := write(t, config)
	_, err := profile.LoadConfig(path)
	if err == nil {
		t.Fatal("loaded")
	}
	msg := err.Error()
	t.Log(msg)
	if !strings.HasPrefix(msg, path+": ") || strings.Contains(msg, "\n") {
		t.Errorf("want one line starting with %q", path+": ")
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("want %q in it", w)
		}
	}
	for _, w := range dontWant {
		if strings.Contains(strings.TrimPrefix(msg, path), w) {
			t.Errorf("want no %q in it", w)
		}
	}
}

// TestExtenderURL: kube-scheduler calls urlPrefix + "/" + verb without
// checking the URL, and skips an ignorable extender it cannot reach; every
// shape of URL that cannot be called as meant is refused, naming the field.
func TestExtenderURL(t *testing.T) {
	const at = "extenders[0].urlPrefix: "
	for _, tc := range []struct {
		url  string
		want []string
	}{
		{`""`, []string{at + "required: the extender's http:// or https:// URL"}},
		// no scheme: a host and port parse as scheme and opaque
		{"rebalancer-extender.rebalancer-system.svc:8888", []string{at + `"rebalancer-extender.rebalancer-system.svc:8888": no scheme, want http:// or https:// (did you mean "http://rebalancer-extender.rebalancer-system.svc:8888"?)`}},
		{"rebalancer-extender:8888", []string{`no scheme`, `did you mean "http://rebalancer-extender:8888"?`}},
		{"10.96.0.42:8888", []string{`no scheme`, `did you mean "http://10.96.0.42:8888"?`}},
		{"10.96.0.42:8888/scheduler", []string{`no scheme`, `did you mean "http://10.96.0.42:8888/scheduler"?`}},
		{"//10.96.0.42:8888", []string{`no scheme`, `did you mean "http://10.96.0.42:8888"?`}},
		{"rebalancer-extender", []string{`no scheme`, `did you mean "http://rebalancer-extender"?`}},
		{"/prioritize", []string{at + `"/prioritize": no scheme, want http:// or https://`}},
		{"http//10.96.0.42:8888", []string{at + `"http//10.96.0.42:8888": no scheme, want http:// or https://`}},
		// other schemes
		{"unix:///run/rebalancer/extender.sock", []string{at + `"unix:///run/rebalancer/extender.sock": scheme "unix", want http or https`}},
		{"unix:extender.sock", []string{`scheme "unix", want http or https`}},
		{"file:///var/lib/extender", []string{`scheme "file", want http or https`}},
		{"grpc://10.96.0.42:8888", []string{`scheme "grpc", want http or https`}},
		// no host
		{"http://", []string{at + `"http://": no host, want http://host[:port][/path]`}},
		{"https://:8888", []string{at + `"https://:8888": no host, want https://host[:port][/path]`}},
		{"http:/10.96.0.42:8888", []string{`no host`}},
		{"http:10.96.0.42:8888", []string{`no host`}},
		// where the verb would go
		{"http://10.96.0.42:8888/?v=1", []string{at + `"http://10.96.0.42:8888/?v=1": a query (?...), which kube-scheduler would append the verb to`}},
		{"http://10.96.0.42:8888?", []string{`a query (?...)`}},
		{"http://10.96.0.42:8888/#x", []string{at + `"http://10.96.0.42:8888/#x": a fragment (#...), which kube-scheduler would append the verb to`}},
		{"http://10.96.0.42:8888#", []string{`a fragment (#...)`}},
		// credentials, ports, unparsable
		{"https://admin:hunter2@10.96.0.42:8888", []string{at + `"https://admin:xxxxx@10.96.0.42:8888": credentials in the URL`}},
		{"http://admin@10.96.0.42:8888", []string{`credentials in the URL`}},
		{"http://10.96.0.42:88888", []string{at + `"http://10.96.0.42:88888": port 88888, want 1 to 65535`}},
		{"http://10.96.0.42:0", []string{`port 0, want 1 to 65535`}},
		{"http://10.96.0.42:http", []string{at + `"http://10.96.0.42:http": invalid port ":http" after host`}},
		{"http://rebalancer extender:8888", []string{`invalid character " " in host name`}},
		{`" http://10.96.0.42:8888"`, []string{at + `" http://10.96.0.42:8888": leading or trailing whitespace`}},
	} {
		t.Run(tc.url, func(t *testing.T) {
			refused(t, replace(t, extenderConfig(t), shippedURL, "urlPrefix: "+tc.url), tc.want, "hunter2")
		})
	}

	for _, url := range []string{
		"http://10.96.0.42:8888",
		"http://10.96.0.42:8888/",
		"https://rebalancer-extender.rebalancer-system.svc:8888/scheduler",
		"HTTP://10.96.0.42:8888",
		"http://[fd00::42]:8888",
	} {
		t.Run(url, func(t *testing.T) {
			path := write(t, replace(t, extenderConfig(t), shippedURL, "urlPrefix: "+url))
			_, exts, err := profile.Schedulers([]string{path}, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(exts) != 1 || exts[0].URLPrefix != url {
				t.Errorf("extenders %+v, want the one at %s", exts, url)
			}
		})
	}
}

// TestExtenderTLS: over http:// kube-scheduler uses none of the TLS
// settings.
func TestExtenderTLS(t *testing.T) {
	refused(t, extenderConfig(t)+"  enableHTTPS: true\n", []string{
		`extenders[0].enableHTTPS: true, but urlPrefix "http://rebalancer-extender.rebalancer-system.svc:8888" is http://, which kube-scheduler calls without TLS: use https://`})
	refused(t, extenderConfig(t)+"  tlsConfig: {insecure: true}\n", []string{
		`extenders[0].tlsConfig: set, but urlPrefix "http://rebalancer-extender.rebalancer-system.svc:8888" is http://`})
	https := replace(t, extenderConfig(t), "urlPrefix: http://", "urlPrefix: https://")
	for _, extra := range []string{"", "  enableHTTPS: true\n", "  enableHTTPS: true\n  tlsConfig: {insecure: true}\n"} {
		if _, err := profile.LoadConfig(write(t, https+extra)); err != nil {
			t.Errorf("https:// with %q: %v", extra, err)
		}
	}
}

// TestExtenderTimeout: 0 is kube-scheduler's default; a negative timeout is
// none at all to net/http, and one shorter than a prioritize call makes
// kube-scheduler skip the scores rebalancer plans with.
func TestExtenderTimeout(t *testing.T) {
	const at = "extenders[0].httpTimeout: "
	for _, tc := range []struct {
		timeout string
		want    []string
	}{
		{"-1s", []string{at + "-1s: must not be negative (0 is kube-scheduler's default, 5s)"}},
		{"-1ns", []string{at + "-1ns: must not be negative"}},
		{"-5m", []string{at + "-5m0s: must not be negative"}},
		{"1ns", []string{at + "1ns: below 10ms, less than a prioritize call can take"}},
		{"9ms", []string{at + "9ms: below 10ms"}},
		// Not a string, not a duration: the strict pass's.
		{"1", []string{"extenders.httpTimeout: cannot unmarshal number into string"}},
		{"soon", []string{at + `"soon": time: invalid duration "soon"`}},
		{"1 s", []string{at + `"1 s": time: unknown unit " s" in duration "1 s"`}},
	} {
		t.Run(tc.timeout, func(t *testing.T) {
			refused(t, replace(t, extenderConfig(t), "httpTimeout: 1s", "httpTimeout: "+tc.timeout), tc.want)
		})
	}
	for timeout, want := range map[string]time.Duration{"0s": 0, "10ms": 10 * time.Millisecond, "1s": time.Second, "30s": 30 * time.Second} {
		t.Run(timeout, func(t *testing.T) {
			cfg, err := profile.LoadConfig(write(t, replace(t, extenderConfig(t), "httpTimeout: 1s", "httpTimeout: "+timeout)))
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Extenders[0].HTTPTimeout.Duration; got != want {
				t.Errorf("httpTimeout %s, want %s", got, want)
			}
		})
	}
}

// TestExtenderProblemsTogether: every problem of every extender is named in
// one error, kube-scheduler's own (its weight) among them.
// TestExtenderTakesNodeNames: rebalancer's extender asked for whole Nodes
// (nodeCacheCapable false or left out) is refused: at 5,000 nodes such a
// call is larger than the extender reads.
func TestExtenderTakesNodeNames(t *testing.T) {
	for _, to := range []string{"\n  nodeCacheCapable: false\n", "\n  nodeCacheCapable: False\n", "\n"} {
		refused(t, replace(t, extenderConfig(t), "\n  nodeCacheCapable: true\n", to), []string{"extenders[0].nodeCacheCapable: false", "node names only"})
	}
}

func TestExtenderProblemsTogether(t *testing.T) {
	config := replace(t, extenderConfig(t), "httpTimeout: 1s", "httpTimeout: -1s")
	config = replace(t, config, "\n  weight: 40\n", "\n  weight: 0\n")
	config += "- urlPrefix: unix:///run/extender.sock\n  prioritizeVerb: prioritize\n  filterVerb: filter\n  weight: 1\n"
	refused(t, config, []string{
		"extenders[0].weight: Invalid value: 0: must have a positive weight applied to it",
		"extenders[0].httpTimeout: -1s: must not be negative",
		`extenders[1] (urlPrefix "unix:///run/extender.sock"): rebalancer simulates only its own extender`,
		"filterVerb is set",
		`extenders[1].urlPrefix: "unix:///run/extender.sock": scheme "unix"`,
	})
}
