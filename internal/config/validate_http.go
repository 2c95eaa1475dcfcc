package config

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/actiongw/actiongw/httpact"
)

// An endpoint is judged here, once, for the file: every problem at once,
// with its key, its line and a hint. The layers below check again only
// to protect themselves, and refuse no endpoint this file could not have
// held: the gateway calls httpact's Endpoint.Validate when it builds the
// endpoint, for what only httpact checks (a base path not normalized, a
// port out of range, the header lists, the injected header's name),
// which makes that endpoint unusable, not the file; and httpact runs the
// same checks on every call, whoever built the Endpoint. Where httpact
// decides and this file only maps (the token URL, the proxy, the auth
// kinds' table), its functions are called.

// validateHTTP checks the endpoint [http.NAME].
func (c *Config) validateHTTP(p *problems, name string) {
	e, f := c.HTTP[name], "http."+name
	if err := checkTargetName(name); err != nil {
		p.bad(f, "%v", err)
	}
	u := validateBaseURL(p, f, e.BaseURL)
	if len(e.Methods) == 0 {
		p.bad(f+".methods", "must name at least one method")
	}
	for _, m := range e.Methods {
		if !slices.Contains([]string{"GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"}, m) {
			p.bad(f+".methods", "unknown method %q", m)
		}
	}
	for _, m := range e.ApproveMethods {
		if !slices.Contains(e.Methods, m) {
			p.bad(f+".approve_methods", "%q is not one of the endpoint's methods %q", m, e.Methods)
		}
	}
	for i, pat := range e.Paths {
		if !strings.HasPrefix(pat, "/") {
			p.bad(fmt.Sprintf("%s.paths[%d]", f, i), "must start with /")
		}
	}
	validateHTTPAuth(p, f, e)
	if e.TokenURL != "" {
		if err := httpact.CheckTokenURL(e.TokenURL, e.AllowPrivate || e.TokenVia != ""); err != nil {
			p.bad(f+".token_url", "%v", err)
		}
	}
	c.validateVia(p, f, e)
	var pe *httpact.EndpointError
	if errors.As(httpact.CheckProxy(e.Proxy, e.UseEnvProxy, e.BaseURL, e.TokenURL, e.Auth), &pe) {
		p.bad(f+"."+pe.Field, "%s", pe.Reason)
	}
	switch e.FollowRedirects {
	case "none", "same-origin":
	default:
		p.bad(f+".follow_redirects", `must be "none" or "same-origin", got %q`, e.FollowRedirects)
	}
	validateHTTPTLS(p, f, e, u)
	if e.Timeout <= 0 {
		p.bad(f+".timeout", "must be positive")
	}
	if e.Timeout > e.MaxTimeout {
		p.bad(f+".timeout", "must not exceed max_timeout (%s)", e.MaxTimeout)
	}
	if e.MaxURLBytes < 1 || e.MaxHeaderBytes < 1 {
		p.bad(f, "max_url_bytes and max_header_bytes must be positive")
	}
	if e.MaxRequestBytes < 0 || e.DrainCap < 0 || e.MaxAttempts < 1 || e.MaxAttempts > 10 || e.MaxConcurrent < 0 {
		p.bad(f, "max_request_bytes and drain_cap must not be negative, max_attempts must be 1-10")
	}
	p.add(checkSecretNames(f, map[string]string{
		"token_secret": e.TokenSecret, "password_secret": e.PasswordSecret, "client_key_secret": e.ClientKeySecret,
		"client_secret_secret": e.ClientSecretSecret, "refresh_token_secret": e.RefreshTokenSecret,
	})...)
	p.add(checkNoInline(f, e.Description, e.BaseURL, e.User, e.Header, e.Param)...)
}

// validateVia checks via and token_via: each names an [ssh.*] target,
// token_via only for a token URL, neither with a proxy, and the URL each
// carries names a host the target may be asked for (httpact.CheckViaURL).
func (c *Config) validateVia(p *problems, f string, e *HTTPEndpoint) {
	for _, v := range []struct{ key, target, url, urlKey string }{
		{"via", e.Via, e.BaseURL, "base_url"}, {"token_via", e.TokenVia, e.TokenURL, "token_url"}} {
		if v.target == "" {
			continue
		}
		if t, ok := c.SSH[v.target]; !ok {
			p.bad(f+"."+v.key, "names no [ssh.%s] target", v.target)
		} else if t.CASecret != "" {
			p.bad(f+"."+v.key, "names [ssh.%s], a ca_secret target: its certificates force one command and permit no forwarding; go through a key_secret target", v.target)
		}
		switch {
		case v.url == "" && v.key == "token_via":
			p.bad(f+".token_via", "is only for an OAuth2 token_url")
		case e.Proxy != "" || e.UseEnvProxy:
			p.bad(f+"."+v.key, "goes through an SSH target: not together with proxy or use_env_proxy")
		default:
			if err := httpact.CheckViaURL(v.url); err != nil {
				p.bad(f+"."+v.urlKey, "%v (with %s = %q)", err, v.key, v.target)
			}
		}
	}
	if e.Via != e.TokenVia && e.TokenURL != "" && httpact.SameHostPort(e.BaseURL, e.TokenURL) {
		p.bad(f+".token_via", "the token_url has the base_url's host and port, so it must go the same way: set token_via = %q", e.Via)
	}
}

// validateBaseURL checks base_url and returns it parsed, nil if it does
// not parse.
func validateBaseURL(p *problems, f, raw string) *url.URL {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		p.bad(f+".base_url", "is required")
	case err != nil:
		p.bad(f+".base_url", "is not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		p.bad(f+".base_url", "must start with https:// or http://")
	case u.Host == "":
		p.bad(f+".base_url", "has no host")
	case u.User != nil:
		p.bad(f+".base_url", "must not carry userinfo; use auth = \"basic\" with password_secret")
	case u.RawQuery != "" || u.Fragment != "":
		p.bad(f+".base_url", "must not carry a query or fragment; use auth = \"query\" for a credential parameter")
	}
	return u
}

// validateHTTPAuth checks auth against httpact's table of kinds: the
// endpoint sets every key its kind needs, and no other auth key
// (HTTPEndpoint.AuthSettings) but those the kind may use.
func validateHTTPAuth(p *problems, f string, e *HTTPEndpoint) {
	kind, ok := httpact.LookupAuthKind(e.Auth)
	if !ok {
		var names []string
		for _, k := range httpact.AuthKinds() {
			names = append(names, k.Name)
		}
		p.bad(f+".auth", "must be %s or %s, got %q", strings.Join(names[:len(names)-1], ", "), names[len(names)-1], e.Auth)
	}
	have := e.AuthSettings()
	for _, key := range slices.Sorted(maps.Keys(have)) {
		if have[key] != "" && !slices.Contains(kind.Needs, key) && !slices.Contains(kind.Optional, key) {
			p.bad(f+"."+key, "is not used by auth = %q", e.Auth)
		}
	}
	for _, key := range kind.Needs {
		if have[key] == "" {
			p.bad(f+"."+key, "is required by auth = %q", e.Auth)
		}
	}
}

// validateHTTPTLS checks the files of ca_file and client_cert; u is the
// base URL, nil if it does not parse.
func validateHTTPTLS(p *problems, f string, e *HTTPEndpoint, u *url.URL) {
	if e.CAFile != "" {
		if _, err := httpact.LoadCAFile(e.CAFile); err != nil {
			p.bad(f+".ca_file", "%v", err)
		}
	}
	switch {
	case (e.ClientCert == "") != (e.ClientKeySecret == ""):
		p.bad(f, "client_cert and client_key_secret go together: set both (the certificate file and the keyring item of its key) or neither")
	case e.ClientCert == "":
	case u != nil && u.Scheme == "http":
		p.bad(f+".client_cert", "needs an https:// base_url: a client certificate is presented only over TLS")
	default:
		if err := httpact.CheckClientCertFile(e.ClientCert); err != nil {
			p.bad(f+".client_cert", "%v", err)
		}
	}
}
