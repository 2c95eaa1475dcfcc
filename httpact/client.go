package httpact

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// Status is the outcome of a request, as the agent sees it.
type Status string

const (
	StatusOK        Status = "ok"         // a 1xx, 2xx or 3xx response, body read whole
	StatusHTTPError Status = "http_error" // a 4xx or 5xx response, body read whole
	StatusBodyLimit Status = "body_limit" // the body was longer than MaxResponseBody and was cut
	StatusCancelled Status = "cancelled"  // the caller's context was cancelled
	StatusTimeout   Status = "timeout"    // the deadline of the caller's context passed
	StatusFailed    Status = "failed"     // no response: connection, TLS, denied address, ...
)

// Result describes one request. Headers are raw: the caller redacts them.
type Result struct {
	Status     Status
	HTTPStatus int               // zero when no response arrived
	Headers    map[string]string // selected response headers, lower-case names
	// URL is the request URL without query or userinfo, for audit.
	URL       string
	Attempts  int
	Duration  time.Duration
	BodyBytes int64 // body bytes written to the body writer
	BodyCut   bool  // the body went on past MaxResponseBody
	// Reason explains any status other than ok and http_error: the cause
	// of a cancellation, the timeout, the connection error. It never holds
	// a query string, userinfo or header value.
	Reason string
	// Err is the error behind StatusFailed, for errors.As (for example
	// *BlockedAddressError). Its message is Reason.
	Err error
}

// Client sends requests for any number of endpoints, keeping one connection
// pool per endpoint. It is safe for concurrent use.
type Client struct {
	logger *slog.Logger

	mu          sync.Mutex
	transports  map[string]*pool
	tokenCaches map[string]*tokenCache // by endpoint name

	// Tests replace these to map names to addresses and to check that
	// only loopback is ever dialled.
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	// now tells whether a cached access token is fresh; tests move it.
	now func() time.Time
}

// pool is an endpoint's transport and the settings it was built for.
type pool struct {
	key transportKey
	tr  *http.Transport
}

// transportKey is what an endpoint's connections were made for: an
// endpoint reloaded with another CA or client certificate must not reuse
// a connection made with the old one.
type transportKey struct {
	origin        string
	allowPrivate  bool
	roots         *x509.CertPool
	clientCert    *tls.Certificate
	proxy         proxySetting
	via, tokenVia *Via
	maxConns      int
}

// NewClient returns a Client that logs to logger (nil: no logs).
func NewClient(logger *slog.Logger) *Client {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return &Client{
		logger:      logger,
		transports:  make(map[string]*pool),
		tokenCaches: make(map[string]*tokenCache),
		lookup:      resolve,
		dial:        d.DialContext,
		now:         time.Now,
	}
}

// Close closes idle connections and forgets cached access tokens. Requests in flight are ended by their
// contexts, not by Close.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, p := range c.transports {
		p.tr.CloseIdleConnections()
		delete(c.transports, name)
	}
	clear(c.tokenCaches)
}

// transport returns the endpoint's pool, replacing it if the endpoint's
// origin, address policy, TLS or proxy settings changed.
func (c *Client) transport(e *Endpoint, base *url.URL) *http.Transport {
	key := transportKey{origin: origin(base), allowPrivate: e.AllowPrivate, roots: e.RootCAs, clientCert: e.ClientCert,
		proxy: e.proxySetting(), via: e.Via, maxConns: e.MaxConns}
	if o := e.Auth.OAuth2; o != nil {
		key.tokenVia = o.Via
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.transports[e.Name]; ok {
		if p.key == key {
			return p.tr
		}
		p.tr.CloseIdleConnections()
	}
	route := newProxyRoute(key.proxy, e.AllowPrivate)
	tr := &http.Transport{
		// A proxy is only ever the endpoint's own, from configuration:
		// the agent has no say in it.
		Proxy:       func(r *http.Request) (*url.URL, error) { return route.forURL(r.URL) },
		DialContext: c.dialFor(e, base, route),
		OnProxyConnectResponse: func(_ context.Context, p *url.URL, r *http.Request, resp *http.Response) error {
			return connectAnswered(p.Host, r.Host, resp)
		},
		ForceAttemptHTTP2:     true,
		TLSClientConfig:       e.tlsConfig(),
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConns:          8,
		MaxIdleConnsPerHost:   8,
		MaxConnsPerHost:       e.MaxConns,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	c.transports[e.Name] = &pool{key: key, tr: tr}
	return tr
}

// Do sends r to endpoint e and copies the response body into body, reading
// at most e.MaxResponseBody bytes. ctx bounds the whole request, retries
// and body included: its deadline is the request's timeout. body must not
// block for long: the deadline does not interrupt a Write.
//
// Do first runs Check's checks on r (see Check for what they are), then
// checks the credential values. It returns a *RequestError when r is
// refused before anything is sent, an *EndpointError when e or its
// credential is unusable, and e.Allow's error when the endpoint's policy
// refuses the method or path. A response body still in a content coding
// the transport did not decode is not read (StatusFailed) unless
// e.AllowSpecialHeaders lists Accept-Encoding. With an OAuth2 kind, Do
// sends the cached access token or fetches one, and on a 401 fetches one
// new token and retries once (within a small allowance per endpoint, past
// which the 401 is the answer); a token that cannot be fetched is
// StatusFailed with a *TokenError in Result.Err, and a request that the
// endpoint's proxy setting refuses is StatusFailed with a *ProxyError
// (see Endpoint.Proxy). Every other
// outcome, including connection failures, timeouts and cancellation, is a
// Result with a nil error.
func (c *Client) Do(ctx context.Context, e *Endpoint, r Request, body io.Writer) (*Result, error) {
	start := time.Now()
	if body == nil {
		body = io.Discard
	}
	out, err := e.prepare(&r)
	if err != nil {
		return nil, err
	}
	res := &Result{URL: redactedURL(out.url)}
	defer func() {
		res.Duration = time.Since(start)
		c.logger.LogAttrs(ctx, slog.LevelDebug, "http request",
			slog.String("endpoint", e.Name), slog.String("method", out.method),
			slog.String("url", res.URL), slog.String("status", string(res.Status)),
			slog.Int("http_status", res.HTTPStatus), slog.Int("attempts", res.Attempts),
			slog.Int64("body_bytes", res.BodyBytes), slog.Duration("duration", res.Duration))
	}()

	hreq, err := http.NewRequestWithContext(ctx, out.method, out.base.String(), nil)
	if err != nil {
		return nil, err
	}
	hreq.URL, hreq.Host, hreq.Header = out.url, out.url.Host, out.header
	rreq, err := retryablehttp.FromRequest(hreq)
	if err != nil {
		return nil, err
	}
	if len(out.body) > 0 {
		if err := rreq.SetBody(out.body); err != nil {
			return nil, err
		}
	}

	tr := c.transport(e, out.base)
	rt := newRetrier(e.Retry, out.method, out.header)
	rc := rt.client(tr, e.redirectPolicy(out.base, !r.NoRedirects))
	// withToken sets an OAuth2 access token, where the kind puts it: the
	// cached one, or a new one when there is none or stale is it.
	kind := e.Auth.kind()
	var tok []byte
	withToken := func(stale []byte) (err error) {
		if tok, err = c.token(ctx, e, tr, stale); err == nil {
			kind.inject(&e.Auth, tok, nil, rreq.Header)
		}
		return err
	}
	if kind.OAuth2 {
		if err := withToken(nil); err != nil {
			res.fail(ctx, out.method, err)
			return res, nil
		}
	}
	resp, err := rc.Do(rreq)
	res.Attempts = rt.attempts
	if err == nil && resp.StatusCode == http.StatusUnauthorized && tok != nil {
		// Revoked, or expired before its time: one new token, one retry;
		// unless 401s fetched too many lately, and this one is the answer.
		if err := withToken(tok); !errors.Is(err, errRefetchLimited) {
			drain(resp.Body)
			if err != nil {
				res.fail(ctx, out.method, err)
				return res, nil
			}
			resp, err = rc.Do(rreq)
			res.Attempts += rt.attempts
		}
	}
	if err != nil {
		if resp != nil {
			resp.Body.Close()
		}
		res.fail(ctx, out.method, tlsHint(e, err))
		return res, nil
	}
	defer resp.Body.Close()

	res.HTTPStatus = resp.StatusCode
	res.Headers = selectHeaders(resp.Header, e.ResponseHeaders)
	// The transport asked for gzip and decoded it. A body still in a
	// content coding was sent unasked (br, deflate, gzip twice on one
	// line, ...): redaction cannot see into it, so it is not read.
	if coding := undecodedCoding(resp.Header); coding != "" && resp.Body != http.NoBody &&
		!nameMatches(e.AllowSpecialHeaders, "Accept-Encoding") {
		res.fail(ctx, out.method, fmt.Errorf("the response body is in %s, which actiongw did not ask for and cannot decode: not read, as redaction could not see into it", coding))
		return res, nil
	}
	n, cut, err := copyBody(body, resp.Body, e.MaxResponseBody)
	res.BodyBytes, res.BodyCut = n, cut
	switch {
	case err != nil:
		res.fail(ctx, out.method, fmt.Errorf("copying body: %w", err))
	case cut:
		res.Status = StatusBodyLimit
		res.Reason = fmt.Sprintf("the response body is longer than %d bytes, the most endpoint %q reads; "+
			"%d bytes were read and the rest was not (the request was abandoned); "+
			"to read more, raise drain_cap in [http.%s]", n, e.Name, n, e.Name)
	case resp.StatusCode >= 400:
		res.Status = StatusHTTPError
	default:
		res.Status = StatusOK
	}
	return res, nil
}

// fail sets the status and reason for an error, telling a cancellation or
// timeout (from ctx) from a failure. The request's timeout is the
// deadline of ctx, whoever set it (the gateway sets the action's, with a
// cause that says so and wraps context.DeadlineExceeded): ctx ended at a
// deadline, or with a cause that is one, is StatusTimeout, else
// StatusCancelled; the reason is the cause.
func (res *Result) fail(ctx context.Context, method string, err error) {
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		res.Status = StatusCancelled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(cause, context.DeadlineExceeded) {
			res.Status = StatusTimeout
		}
		res.Reason = cause.Error()
		return
	}
	// A *url.Error would print the URL with its query: keep only the cause.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	// net/http quotes an unparsable Location, which a server may have
	// filled with anything, the credential included.
	if strings.HasPrefix(err.Error(), "failed to parse Location header") {
		err = errors.New("the response's Location header is not a valid URL")
	}
	res.Status = StatusFailed
	res.Err = err
	res.Reason = fmt.Sprintf("%s %s: %v", method, res.URL, err)
}

// redirectPolicy returns the http.Client CheckRedirect for e; without
// follow, every 3xx is the answer. Returning http.ErrUseLastResponse hands
// the 3xx and its Location to the agent.
func (e *Endpoint) redirectPolicy(base *url.URL, follow bool) func(*http.Request, []*http.Request) error {
	const maxHops = 10
	baseOrigin := origin(base)
	baseEsc := strings.TrimSuffix(base.EscapedPath(), "/")
	return func(req *http.Request, via []*http.Request) error {
		// net/http set Referer to the previous URL, query included: with
		// auth = "query" that is the credential, in a header a server
		// may log or echo. No hop carries a Referer.
		req.Header.Del("Referer")
		if !follow || e.FollowRedirects != RedirectsSameOrigin || len(via) > maxHops {
			return http.ErrUseLastResponse
		}
		u := req.URL
		if u.User != nil || origin(u) != baseOrigin {
			return http.ErrUseLastResponse
		}
		esc := u.EscapedPath()
		rel, ok := strings.CutPrefix(esc, baseEsc)
		if !ok || (rel != "" && rel[0] != '/') {
			return http.ErrUseLastResponse
		}
		_, clean, err := confinePath(baseEsc, rel)
		if err != nil || (e.Allow != nil && e.Allow(req.Method, clean) != nil) {
			return http.ErrUseLastResponse
		}
		return nil
	}
}

// selectHeaders returns the response headers named by patterns, keyed by
// lower-case name, values joined by ", ".
func selectHeaders(h http.Header, patterns []string) map[string]string {
	out := make(map[string]string)
	for k, vs := range h {
		if nameMatches(patterns, k) {
			out[strings.ToLower(k)] = strings.Join(vs, ", ")
		}
	}
	return out
}

// copyBufs holds copyBody's buffers: allocating and zeroing 32 KiB per
// request was a sixth of a small request's CPU time.
var copyBufs = sync.Pool{New: func() any { return new([32 << 10]byte) }}

// copyBody copies at most limit bytes of r (zero: all of it) into w and
// reports whether r had more.
func copyBody(w io.Writer, r io.Reader, limit int64) (n int64, cut bool, err error) {
	b := copyBufs.Get().(*[32 << 10]byte)
	defer copyBufs.Put(b)
	buf := b[:]
	if limit == 0 {
		n, err = io.CopyBuffer(w, r, buf)
		return n, false, err
	}
	n, err = io.CopyBuffer(w, io.LimitReader(r, limit), buf)
	if err != nil || n < limit {
		return n, false, err
	}
	m, err := io.ReadFull(r, buf[:1])
	if m > 0 {
		return n, true, nil
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, false, err
}
