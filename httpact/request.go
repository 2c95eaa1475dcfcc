package httpact

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
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
	// NoRedirects returns a 3xx as the answer even where the endpoint
	// follows redirects: for a request a person approved as it is, whose
	// 307 or 308 would send the same method and body to a path the person
	// was not shown.
	NoRedirects bool
}

// Checked is what Check decided about a request: what will be sent, as far
// as the agent chose it.
type Checked struct {
	Method string // upper case
	// Path is the normalized, decoded path relative to the base URL
	// ("/repos/o/r"): what Allow was asked about.
	Path string
	// EscapedPath is the path as sent, the base path included
	// ("/api/repos/o/r").
	EscapedPath string
}

// userAgent is sent unless the agent sets its own; some APIs refuse
// requests without one.
const userAgent = "actiongw"

// checked is a request that passed Check: the agent's query and headers
// are checked and hold no credential yet.
type checked struct {
	Checked
	base   *url.URL
	query  url.Values
	header http.Header
}

// Check runs every check Do runs on the agent's part of r before anything
// is sent: the method, the path's confinement under the base URL,
// e.Allow on the normalized method and path, the query, the headers
// (forbidden, special, allowlist, denylist), the body's size and JSON, and
// MaxURLBytes and MaxHeaderBytes. Do runs it again, so a caller may call
// Check first to decide and record the request, then Do.
//
// Check returns a *RequestError for an agent mistake, an *EndpointError if
// e is invalid, and Allow's error as is when the policy refuses. Once the
// path is confined, Checked is filled even with an error, so a refusal can
// be recorded with the path that was refused. Check does not look at the
// credential values, which Do checks as well.
func (e *Endpoint) Check(r Request) (Checked, error) {
	c, err := e.check(&r)
	return c.Checked, err
}

// check is Check, also returning the parsed base URL and the agent's
// checked query and headers.
func (e *Endpoint) check(r *Request) (c checked, err error) {
	c.base, err = e.validate() // on every call: see Validate
	if err != nil {
		return c, err
	}
	kind := e.Auth.kind()

	c.Method = strings.ToUpper(r.Method)
	if !validToken(c.Method) {
		return checked{}, &RequestError{Field: "method", Reason: "is not an HTTP method"}
	}
	if c.Method == http.MethodConnect {
		return checked{}, &RequestError{Field: "method", Reason: "CONNECT is not supported"}
	}

	c.EscapedPath, c.Path, err = confinePath(strings.TrimSuffix(c.base.EscapedPath(), "/"), r.Path)
	if err != nil {
		return checked{}, err
	}
	if e.Allow != nil {
		if err := e.Allow(c.Method, c.Path); err != nil {
			return c, err
		}
	}

	if c.query, err = e.query(kind, r.Query); err != nil {
		return c, err
	}
	if n := urlBytes(c.EscapedPath, c.query); e.MaxURLBytes > 0 && n > e.MaxURLBytes {
		return c, &RequestError{Field: "url", Reason: fmt.Sprintf(
			"the path and query are %d bytes as sent, over this endpoint's limit of %d (max_url_bytes)", n, e.MaxURLBytes)}
	}
	if c.header, err = e.header(kind, r.Headers); err != nil {
		return c, err
	}

	if n := int64(len(r.Body)); e.MaxRequestBody > 0 && n > e.MaxRequestBody {
		return c, &RequestError{Field: "body", Reason: fmt.Sprintf(
			"is %d bytes, over this endpoint's limit of %d (max_request_bytes)", n, e.MaxRequestBody)}
	}
	if r.JSON && !json.Valid(r.Body) {
		return c, &RequestError{Field: "body", Reason: "is not valid JSON"}
	}
	return c, nil
}

// urlBytes is the length of the escaped path and the agent's query as
// sent. The query credential is not counted: the limit is on what the
// agent chose, and an error must not tell the credential's length.
func urlBytes(esc string, q url.Values) int {
	n := len(esc)
	if s := q.Encode(); s != "" {
		n += 1 + len(s)
	}
	return n
}

// outgoing is a checked request with its credential, ready to send.
type outgoing struct {
	base   *url.URL
	url    *url.URL
	method string
	header http.Header
	body   []byte
}

// prepare checks r against e, as Check does, checks the credential values
// and builds the request with them.
func (e *Endpoint) prepare(r *Request) (*outgoing, error) {
	c, err := e.check(r)
	if err != nil {
		return nil, err
	}
	if err := e.checkSecrets(); err != nil {
		return nil, err
	}
	q, h := c.query, c.header // fresh from check: ours to change
	if h.Get("User-Agent") == "" {
		h.Set("User-Agent", userAgent)
	}
	if r.JSON && h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	if kind := e.Auth.kind(); !kind.OAuth2 {
		kind.inject(&e.Auth, nil, q, h) // an OAuth2 token is set by Do, once fetched
	}

	u := &url.URL{Scheme: c.base.Scheme, Host: c.base.Host, RawQuery: q.Encode()}
	u.Path, _ = url.PathUnescape(c.EscapedPath) // built from checked segments
	u.RawPath = c.EscapedPath
	return &outgoing{base: c.base, url: u, method: c.Method, header: h, body: r.Body}, nil
}

// query checks the agent's query; kind is e's auth kind.
func (e *Endpoint) query(kind *AuthKind, in url.Values) (url.Values, error) {
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
		if kind.setsParam(&e.Auth, k) {
			return nil, bad(fmt.Sprintf("parameter %q is set by actiongw and cannot be supplied", k))
		}
		for _, v := range vs {
			if hasControl(v) {
				return nil, bad(fmt.Sprintf("the value of %q contains a control character", k))
			}
		}
		q[k] = vs
	}
	return q, nil
}

// header checks the agent's headers; kind is e's auth kind.
func (e *Endpoint) header(kind *AuthKind, in map[string]string) (http.Header, error) {
	h := make(http.Header, len(in)+2)
	size := 0
	for k, v := range in {
		bad := func(reason string) error {
			return &RequestError{Field: "headers", Reason: reason}
		}
		if !validToken(k) {
			return nil, bad("a header name is not a valid token") // it may hold anything: not echoed
		}
		if agentForbidden(k) || kind.setsHeader(&e.Auth, k) {
			return nil, bad(fmt.Sprintf("%q is set by actiongw and cannot be supplied", k))
		}
		if err := e.checkSpecial(k); err != nil {
			return nil, err
		}
		if err := e.checkAccept(k, v); err != nil {
			return nil, err
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
		if _, dup := h[http.CanonicalHeaderKey(k)]; dup {
			// Which of the two would be sent would depend on map order.
			return nil, bad(fmt.Sprintf("%q is given twice, in different cases", http.CanonicalHeaderKey(k)))
		}
		size += len(k) + len(v)
		h.Set(k, v)
	}
	if e.MaxHeaderBytes > 0 && size > e.MaxHeaderBytes {
		return nil, &RequestError{Field: "headers", Reason: fmt.Sprintf(
			"are %d bytes (names and values), over this endpoint's limit of %d (max_header_bytes)", size, e.MaxHeaderBytes)}
	}
	return h, nil
}
