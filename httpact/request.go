package httpact

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Request is one request as the gateway built it from the agent's
// arguments. It names no scheme, host or port: those come from the
// Endpoint.
type Request struct {
	Method string // case-insensitive; must be allowed by the endpoint
	// Path is joined under the base URL's path. It is in escaped form
	// ("/files/a%20b"); existing percent-encoding is kept as given.
	Path    string
	Query   url.Values
	Headers map[string]string
	Body    []byte
	// JSON marks Body as JSON: it must be valid, and Content-Type is set to
	// application/json unless Headers set one.
	JSON bool
	// Timeout bounds the whole request, retries and body included; the
	// gateway decides it (policy.Timeout). Zero means none but the
	// context's.
	Timeout time.Duration
}

// userAgent is sent unless the agent sets its own; some APIs refuse
// requests without one.
const userAgent = "actiongw"

// outgoing is a checked request ready to send.
type outgoing struct {
	base   *url.URL
	url    *url.URL
	method string
	header http.Header
	body   []byte
}

// prepare checks r against e and builds the request. It returns a
// *RequestError for an agent mistake, an *EndpointError for a configuration
// or credential problem, and Allow's error when the policy refuses.
func (e *Endpoint) prepare(r *Request) (*outgoing, error) {
	base, err := e.validate()
	if err != nil {
		return nil, err
	}
	if err := e.checkSecrets(); err != nil {
		return nil, err
	}

	method := strings.ToUpper(r.Method)
	if !validToken(method) {
		return nil, &RequestError{Field: "method", Reason: "is not an HTTP method"}
	}
	if method == http.MethodConnect {
		return nil, &RequestError{Field: "method", Reason: "CONNECT is not supported"}
	}

	esc, clean, err := confinePath(strings.TrimSuffix(base.EscapedPath(), "/"), r.Path)
	if err != nil {
		return nil, err
	}
	if e.Allow != nil {
		if err := e.Allow(method, clean); err != nil {
			return nil, err
		}
	}

	q, err := e.query(r.Query)
	if err != nil {
		return nil, err
	}
	h, err := e.header(r.Headers)
	if err != nil {
		return nil, err
	}

	if n := int64(len(r.Body)); e.MaxRequestBody > 0 && n > e.MaxRequestBody {
		return nil, &RequestError{Field: "body", Reason: fmt.Sprintf("is %d bytes, over this endpoint's limit of %d", n, e.MaxRequestBody)}
	}
	if r.JSON {
		if !json.Valid(r.Body) {
			return nil, &RequestError{Field: "body", Reason: "is not valid JSON"}
		}
		if h.Get("Content-Type") == "" {
			h.Set("Content-Type", "application/json")
		}
	}

	u := &url.URL{Scheme: base.Scheme, Host: base.Host, RawQuery: q.Encode()}
	u.Path, _ = url.PathUnescape(esc) // esc was built from checked segments
	u.RawPath = esc
	return &outgoing{base: base, url: u, method: method, header: h, body: r.Body}, nil
}

// query checks the agent's query and adds the query credential.
func (e *Endpoint) query(in url.Values) (url.Values, error) {
	q := make(url.Values, len(in)+1)
	for k, vs := range in {
		bad := func(reason string) error {
			return &RequestError{Field: "query", Reason: reason}
		}
		if k == "" {
			return nil, bad("has an empty parameter name")
		}
		if hasControl(k) {
			return nil, bad("a parameter name contains a control character")
		}
		if e.Auth.Kind == AuthQuery && strings.EqualFold(k, e.Auth.Param) {
			return nil, bad(fmt.Sprintf("parameter %q is set by actiongw and cannot be supplied", k))
		}
		for _, v := range vs {
			if hasControl(v) {
				return nil, bad(fmt.Sprintf("the value of %q contains a control character", k))
			}
		}
		q[k] = vs
	}
	if e.Auth.Kind == AuthQuery {
		q.Set(e.Auth.Param, string(e.Auth.Token))
	}
	return q, nil
}

// header checks the agent's headers and adds the credential.
func (e *Endpoint) header(in map[string]string) (http.Header, error) {
	h := make(http.Header, len(in)+2)
	for k, v := range in {
		bad := func(reason string) error {
			return &RequestError{Field: "headers", Reason: reason}
		}
		if !validToken(k) {
			return nil, bad("a header name is not a valid token") // it may hold anything: not echoed
		}
		if agentForbidden(k) || (e.Auth.Kind == AuthHeader && strings.EqualFold(k, e.Auth.Header)) {
			return nil, bad(fmt.Sprintf("%q is set by actiongw and cannot be supplied", k))
		}
		if len(e.HeaderAllow) > 0 && !nameMatches(e.HeaderAllow, k) {
			return nil, bad(fmt.Sprintf("%q is not in this endpoint's header allowlist", k))
		}
		if nameMatches(e.HeaderDeny, k) {
			return nil, bad(fmt.Sprintf("%q is denied on this endpoint", k))
		}
		if hasControl(v) {
			return nil, bad(fmt.Sprintf("the value of %q contains a control character", k))
		}
		h.Set(k, v)
	}
	if h.Get("User-Agent") == "" {
		h.Set("User-Agent", userAgent)
	}
	switch e.Auth.Kind {
	case AuthBearer:
		h.Set("Authorization", "Bearer "+string(e.Auth.Token))
	case AuthBasic:
		cred := make([]byte, 0, len(e.Auth.User)+1+len(e.Auth.Password))
		cred = append(append(append(cred, e.Auth.User...), ':'), e.Auth.Password...)
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString(cred))
		clear(cred)
	case AuthHeader:
		h.Set(e.Auth.Header, string(e.Auth.Token))
	}
	return h, nil
}
