package httpact

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Redirect policies for Endpoint.FollowRedirects.
const (
	RedirectsNone       = "none"
	RedirectsSameOrigin = "same-origin"
)

// Endpoint is one configured HTTP target. The zero value of each optional
// field is documented on it; Validate checks the fields that come from
// configuration.
type Endpoint struct {
	// Name is the endpoint name the agent uses; it keys the connection
	// pool, so two endpoints must not share one.
	Name string
	// BaseURL is "http(s)://host[:port][/path]" without userinfo, query or
	// fragment. Every request goes to this origin, under this path.
	BaseURL string
	// Allow decides which methods and paths the endpoint permits; the
	// gateway passes its policy here (policy.Requests.Check has this
	// shape). It is asked before anything is sent and before each redirect
	// hop, with the upper-case method and the normalized, decoded path
	// relative to the base ("/repos/o/r", no trailing slash, an encoded
	// slash splitting segments too). A non-nil error refuses: Do returns it
	// as is; a refused hop's 3xx goes back to the agent. Nil permits every
	// method and path under the base.
	Allow func(method, path string) error
	// MaxRequestBody caps Request.Body; zero means no limit.
	MaxRequestBody int64
	// MaxURLBytes caps the escaped path as sent (the base path included)
	// and the agent's query as sent, together; the query credential is not
	// counted. Zero means no limit.
	MaxURLBytes int
	// MaxHeaderBytes caps the agent's headers, the lengths of their names
	// and values added up; zero means no limit.
	MaxHeaderBytes int
	// MaxResponseBody is how many response body bytes are read (the
	// caller's retention budget plus its drain cap); past it the request is
	// abandoned and the result says the body was cut. Zero means no limit.
	MaxResponseBody int64
	// Auth is injected into each request.
	Auth Auth
	// AllowPrivate lets the endpoint reach loopback and private addresses
	// (RFC 1918, unique-local, shared CGNAT). Link-local (cloud metadata),
	// unspecified, multicast and reserved addresses stay refused.
	AllowPrivate bool
	// FollowRedirects is "" or RedirectsNone (a 3xx is returned as is) or
	// RedirectsSameOrigin (hops to the same scheme, host and port, under
	// the base path and permitted by Allow, are followed; others are
	// returned).
	FollowRedirects string
	// HeaderAllow, if not empty, lists the only headers an agent may set;
	// HeaderDeny lists headers it may not set. Names are case-insensitive;
	// a trailing "*" matches a prefix ("X-Custom-*"). Authorization, Cookie,
	// Host, Proxy-*, framing headers and the injected header are always
	// refused.
	HeaderAllow, HeaderDeny []string
	// AllowSpecialHeaders lists the special headers the agent may set here,
	// still subject to HeaderAllow and HeaderDeny; empty refuses them all.
	// Special headers make the server change the form of the body
	// (Accept-Encoding, Accept-Charset, A-IM, Range, Request-Range,
	// If-Range), which redaction then cannot see through, or the method or
	// path it acts on (X-HTTP-Method-Override, X-HTTP-Method,
	// X-Method-Override, X-Original-URL, X-Rewrite-URL), past Allow.
	// Listing Accept-Encoding also passes a body still in a content coding
	// on undecoded, which Do otherwise refuses to read; listing
	// Accept-Charset also passes an Accept whose media types name a
	// charset other than UTF-8 ("application/json;charset=UTF-16"), which
	// is otherwise refused.
	AllowSpecialHeaders []string
	// ResponseHeaders selects the response headers returned, in the same
	// form as HeaderAllow; empty returns none.
	ResponseHeaders []string
	// Retry is the retry policy.
	Retry RetryPolicy
	// RootCAs verifies the server's certificate; nil means the system pool.
	// It applies to this endpoint's connections only. LoadCAFile builds
	// one that trusts a private CA besides the system roots.
	RootCAs *x509.CertPool
	// ClientCert is presented to the server when it asks for a client
	// certificate (mutual TLS), on this endpoint's connections only;
	// LoadClientCert builds it. Nil presents none.
	ClientCert *tls.Certificate
	// Proxy is an HTTP proxy, "http://host:port" (CheckProxyURL), that
	// every request of the endpoint and every fetch of its OAuth2 token go
	// through. An https request crosses it inside a CONNECT tunnel, so the
	// proxy sees only the host and port, never a header or the
	// credential; a plain http request with a credential is refused
	// (CheckProxy). The proxy resolves the host: the address guard checks
	// the proxy's own address (loopback and private allowed) and a literal
	// address in the URL, nothing else. "" uses none, unless
	// ProxyFromEnvironment.
	Proxy string
	// Via, if set, carries every connection to the base URL's host and
	// port (an SSH target's server opens them, in actiongw): the far side
	// resolves the host name, and https runs TLS over it end to end, the
	// certificate checked against that name with RootCAs and ClientCert
	// as for any endpoint. The host may then be a loopback or private
	// address without AllowPrivate (they are the far side's), but a
	// literal address never allowable (link-local, cloud metadata, ...)
	// is refused, as a proxied one is; and nothing but that host and port
	// (and the token URL's, see OAuth2.Via) is ever connected to. Not
	// with Proxy or ProxyFromEnvironment. Nil connects from this host.
	Via *Via
	// MaxConns bounds the connections open at once to the base URL's
	// host and port (net/http's MaxConnsPerHost): a request past it
	// waits for one. Zero means no bound.
	MaxConns int
	// ProxyFromEnvironment takes the proxy from this process's
	// environment, read when the endpoint's transport is built:
	// HTTPS_PROXY for https URLs, HTTP_PROXY for http ones, each in the
	// form Proxy takes (or "host:port"), except for the hosts NO_PROXY
	// lists and loopback, which are reached directly through the guard.
	// Not together with Proxy. False uses no proxy from the environment.
	ProxyFromEnvironment bool
}

// RetryPolicy bounds retries. Only idempotent requests (GET, HEAD, OPTIONS,
// PUT, DELETE, or any request with an Idempotency-Key header) are retried,
// on connection errors, 429 and 5xx except 501.
type RetryPolicy struct {
	// MaxAttempts counts the first attempt; zero or 1 disables retries.
	MaxAttempts int
	// WaitMin and WaitMax bound the exponential backoff; zero means 200ms
	// and 5s.
	WaitMin, WaitMax time.Duration
	// RetryAfterMax caps a server's Retry-After; zero means 30s.
	RetryAfterMax time.Duration
}

// alwaysForbidden are request headers the agent can never set: credentials,
// routing, and message framing that could smuggle a second request.
var alwaysForbidden = []string{
	"Authorization", "Cookie", "Cookie2", "Host", "Proxy-*",
	"Connection", "Content-Length", "Transfer-Encoding", "TE", "Trailer",
	"Upgrade", "Keep-Alive", "Expect",
}

func agentForbidden(name string) bool { return nameMatches(alwaysForbidden, name) }

// Validate checks the configured fields of e. It does not look at secret
// values, which may not be loaded yet; Client.Do checks those. It returns an
// *EndpointError.
//
// Check, Do, Probe and ProbeToken run the same checks on every call, to
// protect httpact itself: an Endpoint is a struct its caller fills in, and
// may change, and none is sent that these checks refuse, whoever built it.
func (e *Endpoint) Validate() error {
	_, err := e.validate()
	return err
}

// validate is Validate, returning the parsed base URL.
func (e *Endpoint) validate() (*url.URL, error) {
	bad := func(field, format string, args ...any) (*url.URL, error) {
		return nil, e.invalid(field, format, args...)
	}
	if e.Name == "" {
		return bad("name", "must not be empty")
	}
	base, err := parseBaseURL(e.BaseURL)
	if err != nil {
		return bad("base_url", "%s", err)
	}
	for _, f := range []struct {
		field string
		v     int64
	}{{"max_request_body", e.MaxRequestBody}, {"max_response_body", e.MaxResponseBody},
		{"max_url_bytes", int64(e.MaxURLBytes)}, {"max_header_bytes", int64(e.MaxHeaderBytes)}} {
		if f.v < 0 {
			return bad(f.field, "must not be negative")
		}
	}
	switch e.FollowRedirects {
	case "", RedirectsNone, RedirectsSameOrigin:
	default:
		return bad("follow_redirects", "must be %q or %q", RedirectsNone, RedirectsSameOrigin)
	}
	for _, lists := range []struct {
		field string
		names []string
	}{{"header_allow", e.HeaderAllow}, {"header_deny", e.HeaderDeny}, {"response_headers", e.ResponseHeaders}} {
		for _, n := range lists.names {
			if !validToken(strings.TrimSuffix(n, "*")) {
				return bad(lists.field, "%q is not a header name", n)
			}
		}
	}
	for _, n := range e.AllowSpecialHeaders {
		if agentForbidden(n) {
			return bad("allow_special_headers", "%q is always refused", n)
		}
		if _, _, ok := specialHeader(n); !ok {
			return bad("allow_special_headers", "%q is not a special header (%s); header_allow and header_deny govern the others", n, specialNames())
		}
	}
	r := e.Retry
	if r.MaxAttempts < 0 || r.WaitMin < 0 || r.WaitMax < 0 || r.RetryAfterMax < 0 {
		return bad("retry", "must not be negative")
	}
	if r.WaitMax > 0 && r.WaitMin > r.WaitMax {
		return bad("retry", "wait_min is larger than wait_max")
	}
	kind := e.Auth.kind()
	if kind == nil {
		return bad("auth", "unknown kind %q (%s)", e.Auth.Kind, strings.Join(authKindNames(), ", "))
	}
	if kind.check != nil {
		if err := kind.check(e); err != nil {
			return nil, err
		}
	}
	if e.Auth.OAuth2 != nil && !kind.OAuth2 {
		return bad("auth", "kind %q takes no OAuth2 settings", e.Auth.Kind)
	}
	tokenURL := ""
	if e.Auth.OAuth2 != nil {
		tokenURL = e.Auth.OAuth2.TokenURL
	}
	var pe *EndpointError
	if errors.As(CheckProxy(e.Proxy, e.ProxyFromEnvironment, e.BaseURL, tokenURL, e.Auth.Kind), &pe) {
		return bad(pe.Field, "%s", pe.Reason)
	}
	if e.MaxConns < 0 {
		return bad("max_conns", "must not be negative")
	}
	if err := e.checkVia(base); err != nil {
		return nil, err
	}
	return base, nil
}

// checkSecrets checks the credential values Do is about to inject, with
// the checks of e's auth kind; e is valid.
func (e *Endpoint) checkSecrets() error {
	if k := e.Auth.kind(); k != nil && k.checkSecrets != nil {
		if reason := k.checkSecrets(&e.Auth); reason != "" {
			return e.invalid("auth", "%s", reason)
		}
	}
	return nil
}

// parseBaseURL parses and checks a base URL. Its errors name no secret: a
// base URL never carries one (userinfo is refused without being echoed).
func parseBaseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("is not a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("must start with http:// or https://")
	case u.User != nil:
		return nil, fmt.Errorf("must not contain userinfo: configure auth instead")
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("must name a host")
	case u.RawQuery != "" || u.ForceQuery:
		return nil, fmt.Errorf("must not contain a query")
	case u.Fragment != "":
		return nil, fmt.Errorf("must not contain a fragment")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("has an invalid port")
		}
	}
	esc := strings.TrimSuffix(u.EscapedPath(), "/")
	if got, _, err := confinePath("", esc); err != nil || (esc != "" && got != esc) {
		return nil, fmt.Errorf("path must be normalized (no dot or empty segments, no encoded separators)")
	}
	u.Scheme = strings.ToLower(u.Scheme)
	return u, nil
}

// origin returns scheme://host:port with the default port made explicit.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// redactedURL is u without userinfo, query and fragment, for errors and logs.
func redactedURL(u *url.URL) string {
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return r.String()
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
