package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/actiongw/actiongw/httpact"
	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/policy"
)

// HTTPRequestTool is the http_request tool.
var HTTPRequestTool = &Tool[HTTPRequestInput, *HTTPRequestOutput]{
	Name: "http_request",
	Description: "Send an HTTP request to a configured endpoint (see list_targets), under its base URL. Returns status, " +
		"selected headers, the first and last lines of the body and a handle for read_output and search_output. " +
		"Credentials are injected by the server and never shown.",
	Hints: Hints{OpenWorld: true},
	Asks:  true,
	Call:  (*Gateway).HTTPRequest,
}

// HTTPRequestInput is the input of the http_request tool.
type HTTPRequestInput struct {
	Endpoint string            `json:"endpoint" jsonschema:"name of an HTTP endpoint, as list_targets gives it"`
	Method   string            `json:"method" jsonschema:"HTTP method, one the endpoint allows"`
	Path     string            `json:"path" jsonschema:"path under the endpoint's base URL, e.g. /repos/a/b; no scheme or host"`
	Query    map[string]string `json:"query,omitempty" jsonschema:"query parameters"`
	Headers  map[string]string `json:"headers,omitempty" jsonschema:"request headers; credentials are injected by the server and cannot be set"`
	Body     string            `json:"body,omitempty" jsonschema:"request body as text"`
	JSON     any               `json:"json,omitempty" jsonschema:"request body as JSON (sets Content-Type: application/json); not together with body"`
	TimeoutS float64           `json:"timeout_s,omitempty" jsonschema:"seconds for the whole request including retries; capped by the endpoint's maximum"`
	WaitS    *float64          `json:"wait_s,omitempty" jsonschema:"seconds this call waits for the response to end (default: the server's wait, 50 s); still running then, it is returned as running with its handle and goes on in the background; 0 starts it in the background"`
}

// HTTPRequestOutput is the structured result of http_request.
type HTTPRequestOutput struct {
	Handle   string `json:"handle"`
	Endpoint string `json:"endpoint"`
	// Status is running, ok, http_error, body_limit, cancelled, timeout or
	// failed.
	Status     Status            `json:"status"`
	HTTPStatus int               `json:"http_status,omitempty"`
	Headers    map[string]string `json:"headers"`
	DurationMS int64             `json:"duration_ms"`
	Attempts   int               `json:"attempts"`
	Body       output.Stream     `json:"body"`
	Reason     string            `json:"reason,omitempty"`
}

// HTTPRequest sends one request to a configured endpoint.
func (g *Gateway) HTTPRequest(ctx context.Context, in HTTPRequestInput, progress Progress) *ToolResult {
	s, fail := g.lookup(ctx, in.Endpoint, false)
	if fail != nil {
		return fail
	}
	method := strings.ToUpper(in.Method)
	k := &httpRequest{g: g, cfg: s.cfg, he: s.http[in.Endpoint], in: in, method: method,
		req: httpact.Request{Method: method, Path: in.Path, Headers: in.Headers, Body: []byte(in.Body)}}
	if in.JSON != nil {
		if in.Body != "" {
			return g.failure("give either body or json, not both")
		}
		b, err := json.Marshal(in.JSON)
		if err != nil {
			return g.failure("json: %v", err)
		}
		k.req.Body, k.req.JSON = b, true
	}
	if len(in.Query) > 0 {
		k.req.Query = url.Values{}
		for name, v := range in.Query {
			k.req.Query.Set(name, v)
		}
	}
	k.sent = in.Path // the path as it will be sent (escaped, from the origin), once checked
	// The audit keeps no query string: it may carry a credential.
	intent := audit.Record{Tool: "http_request", Target: in.Endpoint, Via: s.cfg.HTTP[in.Endpoint].Via, Method: method, Path: strings.SplitN(in.Path, "?", 2)[0]}
	return g.run(ctx, s, &action{kind: k, intent: intent}, progress, in.WaitS)
}

// httpRequest is one http_request call: a request to an HTTP endpoint.
type httpRequest struct {
	g      *Gateway
	cfg    *config.Config
	he     *httpEndpoint
	in     HTTPRequestInput
	method string // upper case
	req    httpact.Request
	// sent is the path as it will be sent, escaped and from the origin,
	// once check confined it.
	sent string
}

var httpRequestStreams = []string{"body"}

func (k *httpRequest) streams() []string { return httpRequestStreams }

// check runs every check of the agent's input on the request as it would
// be sent, policy's first (the endpoint's Allow: the audit records the
// normalized path), then the endpoint's credentials, and policy's
// decision on the normalized request.
func (k *httpRequest) check(intent *audit.Record) (policy.Decision, error) {
	chk, err := k.he.endpoint.Check(k.req)
	if chk.Path != "" {
		intent.Path, k.sent = chk.Path, chk.EscapedPath
	}
	var re *httpact.RequestError
	switch {
	case errors.As(err, &re):
		return policy.Decision{}, &unusableError{"request." + re.Field, re.Reason, err}
	case err != nil:
		return policy.Decision{}, err
	case k.he.err != nil:
		return policy.Decision{}, &unusableError{"credentials", k.he.err.Error(), k.he.err} // it names the endpoint
	}
	d := k.he.rules.Decide(chk.Method, chk.Path, seconds(k.in.TimeoutS))
	k.req.NoRedirects = d.NoRedirects
	return d, d.Err
}

func (k *httpRequest) execute(ctx context.Context, w []io.Writer, _ *atomic.Int64) *ended {
	// w[0] passes every redactor put in effect while the body arrives
	// (followRedactor): it knows the access token the request fetched,
	// learned before it was sent.
	res, err := k.g.http.Do(ctx, k.he.endpoint, k.req, w[0])
	if err != nil {
		// Nothing was sent: a refused path, header or body.
		return &ended{status: StatusFailed, reason: err.Error()}
	}
	// The reason may quote the token endpoint, and the server's bytes (a
	// malformed header line); the headers hold anything a server sends.
	// The pipeline redacts them with the tokens learned during the
	// request.
	return &ended{status: Status(res.Status), reason: res.Reason, remoteReason: true,
		duration: res.Duration, httpStatus: res.HTTPStatus, attempts: res.Attempts, headers: res.Headers}
}

func (k *httpRequest) drop() { k.in.Body, k.in.JSON, k.req.Body = "", nil, nil }

func (k *httpRequest) finish(e *ended) *result {
	headers, omitted := fitHeaders(e.headers)
	out := &HTTPRequestOutput{Handle: e.handle, Endpoint: k.in.Endpoint, Status: e.status, HTTPStatus: e.httpStatus,
		Headers: headers, DurationMS: e.duration.Milliseconds(), Attempts: e.attempts, Body: e.streams[0], Reason: e.reason}
	return &result{structured: out, streams: []output.NamedStream{{Name: "body", Summary: &out.Body}},
		what: out.describe(k.method, e.path, omitted), isError: out.Status != StatusOK}
}

// httpRules are the rules of endpoint name, configured as c.
func httpRules(name string, c *config.HTTPEndpoint) *policy.HTTP {
	return &policy.HTTP{Requests: policy.Requests{Target: name, Methods: c.Methods, Paths: c.Paths},
		ApproveMethods: c.ApproveMethods, Timeout: c.Timeout, MaxTimeout: c.MaxTimeout}
}

// question is the question for the request to the endpoint's base URL,
// with its path normalized, as it will be sent: escaped, since decoded,
// "/a%2Fb" (one segment) and "/a/b" (two) look the same.
func (k *httpRequest) question() *Question {
	quote, endpoint, base, path, req := k.g.quote, k.in.Endpoint, k.he.endpoint.BaseURL, k.sent, k.req
	var b strings.Builder
	if len(req.Query) > 0 {
		path += "?" + req.Query.Encode()
	}
	where := base
	via := k.cfg.HTTP[endpoint].Via
	if via != "" {
		where += fmt.Sprintf(", through SSH target %q", via)
	}
	fmt.Fprintf(&b, "Send this request to HTTP endpoint %q (%s)?\n\n%s %s\n", endpoint, where, req.Method, quote(path))
	parts := []string{"http_request", endpoint, base, via, req.Method, path, strconv.FormatBool(req.JSON), string(req.Body)}
	for _, k := range slices.Sorted(maps.Keys(req.Headers)) {
		fmt.Fprintf(&b, "%s: %s\n", quote(k), quote(req.Headers[k]))
		parts = append(parts, k, req.Headers[k])
	}
	if body := string(req.Body); body != "" {
		kind := "Body"
		if req.JSON {
			kind = "JSON body"
		}
		fmt.Fprintf(&b, "\n%s: %d bytes, sha256 %s:\n%s\n", kind, len(body), sha256Hex(body), quote(output.Clip(body, previewBytes)))
	}
	return &Question{Asked: AskedRequest, Target: endpoint, Message: b.String(),
		Remember: k.cfg.Approval.Remember, Timeout: k.cfg.Approval.Timeout, Key: questionKey(parts...)}
}

// A server chooses its response headers, up to net/http's 10 MiB: a
// result keeps at most maxHeaderBytes of each selected name and value and
// maxHeadersBytes of them all (as JSON), and a reason is clipped to
// maxReasonBytes (remoteReason), so that no answer can make the result
// too large to be returned at the smallest result_bytes (4096), its
// handle with it.
const (
	maxHeaderBytes  = 1024
	maxHeadersBytes = 2048
)

// fitHeaders clips each name and value of the redacted response headers
// to maxHeaderBytes and keeps them, in name order, while they fit
// maxHeadersBytes. Clipping what was redacted whole never leaves the start
// of a secret. It returns how many headers were left out.
func fitHeaders(in map[string]string) (map[string]string, int) {
	out := make(map[string]string, len(in))
	omitted, size := 0, 0
	for _, k := range slices.Sorted(maps.Keys(in)) {
		name := output.Clip(k, maxHeaderBytes)
		value := output.Clip(in[k], maxHeaderBytes)
		n := output.JSONLen(name) + output.JSONLen(value)
		if _, dup := out[name]; dup || size+n > maxHeadersBytes {
			omitted++
			continue
		}
		out[name], size = value, size+n
	}
	return out, omitted
}

// describe says in words what was sent (method and path, the path
// normalized, decoded and redacted, as the audit log records it) and how
// it ended; omitted counts the headers left out.
func (out *HTTPRequestOutput) describe(method, path string, omitted int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "http_request %s %s on %s: %s", method, output.Clip(path, 200), out.Endpoint, out.Status)
	if out.HTTPStatus != 0 {
		fmt.Fprintf(&b, ", HTTP %d", out.HTTPStatus)
	}
	fmt.Fprintf(&b, " after %d ms and %s.", out.DurationMS, output.Plural(out.Attempts, "attempt"))
	if out.Reason != "" {
		fmt.Fprintf(&b, " Reason: %s.", out.Reason)
	}
	if omitted > 0 {
		fmt.Fprintf(&b, " %s left out: the selected ones are larger than a result has room for.", output.Plural(omitted, "response header"))
	}
	return b.String()
}
