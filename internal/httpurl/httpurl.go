// Package httpurl checks the URL of an HTTP server a configuration names
// (a Prometheus server, rebalancer's extender): net/url parses almost any
// string, "prometheus:9090" as scheme "prometheus", "file:///" and "unix:"
// too, and the client then fails at its first request, or never makes one.
package httpurl

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// Rules are what a URL may not carry, each with why, for the message; ""
// allows it.
type Rules struct {
	// Credentials: a user-info part (user:password@).
	Credentials string
	// Query: a query string (?...).
	Query string
	// Fragment: a fragment (#...).
	Fragment string
}

// Problem says what is wrong with raw as the URL of an HTTP server, or "":
// it must be http:// or https:// to a host, with a port in 1-65535 if any,
// and without what rules refuse.
func Problem(raw string, rules Rules) string {
	u, err := url.Parse(raw)
	var urlErr *url.Error
	switch {
	case raw != strings.TrimSpace(raw):
		return fmt.Sprintf("%q: leading or trailing whitespace", raw)
	case noScheme(raw, u, err):
		return fmt.Sprintf("%q: no scheme, want http:// or https:// (did you mean %q?)", raw, "http://"+strings.TrimPrefix(raw, "//"))
	case errors.As(err, &urlErr):
		return fmt.Sprintf("%q: %v", raw, urlErr.Err)
	case err != nil:
		return fmt.Sprintf("%q: %v", raw, err)
	case u.Scheme == "":
		return fmt.Sprintf("%q: no scheme, want http:// or https://", raw)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("%q: scheme %q, want http or https", raw, u.Scheme)
	case u.User != nil && rules.Credentials != "":
		return fmt.Sprintf("%q: credentials in the URL, %s", u.Redacted(), rules.Credentials)
	case u.Opaque != "" || u.Hostname() == "":
		return fmt.Sprintf("%q: no host, want %s://host[:port][/path]", raw, u.Scheme)
	case (u.RawQuery != "" || u.ForceQuery) && rules.Query != "":
		return fmt.Sprintf("%q: a query (?...), %s", raw, rules.Query)
	case (u.Fragment != "" || strings.HasSuffix(raw, "#")) && rules.Fragment != "":
		return fmt.Sprintf("%q: a fragment (#...), %s", raw, rules.Fragment)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("%q: port %s, want 1 to 65535", raw, p)
		}
	}
	return ""
}

// hostPort is the start of what net/url makes of "host:port" without a
// scheme: the host becomes the scheme, the port the opaque part.
var hostPort = regexp.MustCompile(`^[0-9]+(/|$)`)

// noScheme reports whether raw is a host without a scheme, as
// "prometheus:9090", "10.0.0.1:9090" or "//prometheus", which net/url
// parses as scheme "prometheus", refuses, or parses without a scheme.
func noScheme(raw string, u *url.URL, err error) bool {
	if err == nil && u.Scheme != "" && (u.Opaque == "" || !hostPort.MatchString(u.Opaque)) {
		return false
	}
	rest := strings.TrimPrefix(raw, "//")
	if strings.Contains(rest, "//") {
		return false // "http//host": a scheme, misspelt
	}
	v, err := url.Parse("http://" + rest)
	return err == nil && v.Hostname() != "" && v.User == nil
}
