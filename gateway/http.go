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
	"strings"
	"sync/atomic"

	"github.com/actiongw/actiongw/httpact"
	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/policy"
)

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

// httpStatus maps how httpact says a request ended.
var httpStatus = map[httpact.Status]Status{
	httpact.StatusOK:        StatusOK,
	httpact.StatusHTTPError: StatusHTTPError,
	httpact.StatusBodyLimit: StatusBodyLimit,
	httpact.StatusCancelled: StatusCancelled,
	httpact.StatusTimeout:   StatusTimeout,
	httpact.StatusFailed:    StatusFailed,
}

// httpRules are the rules of endpoint name, configured as c.
func httpRules(name string, c *config.HTTPEndpoint) *policy.HTTP {
	return &policy.HTTP{Requests: policy.Requests{Target: name, Methods: c.Methods, Paths: c.Paths},
		ApproveMethods: c.ApproveMethods, Timeout: c.Timeout, MaxTimeout: c.MaxTimeout}
}

// HTTPRequest sends one request to a configured endpoint.
func (g *Gateway) HTTPRequest(ctx context.Context, in HTTPRequestInput, progress Progress) *ToolResult {
	s, fail := g.ready()
	if fail != nil {
		return fail
	}
	he, ok := s.http[in.Endpoint]
	if ok && he.err != nil {
		// A reload may have changed or removed the endpoint meanwhile.
		s = g.refreshed(ctx, s)
		he, ok = s.http[in.Endpoint]
	}
	if !ok {
		_, isSSH := s.ssh[in.Endpoint]
		return g.failure("%s", unknownTarget("HTTP endpoint", in.Endpoint, names(s.http), isSSH, "ssh_exec", "target"))
	}
	method := strings.ToUpper(in.Method)
	req := httpact.Request{Method: method, Path: in.Path, Headers: in.Headers, Body: []byte(in.Body)}
	if in.JSON != nil {
		if in.Body != "" {
			return g.failure("give either body or json, not both")
		}
		b, err := json.Marshal(in.JSON)
		if err != nil {
			return g.failure("json: %v", err)
		}
		req.Body, req.JSON = b, true
	}
	if len(in.Query) > 0 {
		req.Query = url.Values{}
		for k, v := range in.Query {
			req.Query.Set(k, v)
		}
	}
	sent := in.Path // the path as it will be sent (escaped, from the origin), once checked
	return g.run(ctx, s, &action{
		// The audit keeps no query string: it may carry a credential.
		intent: audit.Record{Tool: "http_request", Target: in.Endpoint, Method: method, Path: strings.SplitN(in.Path, "?", 2)[0]},
		check: func(intent *audit.Record) (policy.Decision, error) {
			// Every check of the agent's input, on the request as it would
			// be sent, the policy's first (the endpoint's Allow): the audit
			// records the normalized path.
			chk, err := he.endpoint.Check(req)
			if chk.Path != "" {
				// The person is shown the path escaped, as sent: decoded,
				// "/a%2Fb" (one segment) and "/a/b" (two) look the same.
				intent.Path, sent = chk.Path, chk.EscapedPath
			}
			var re *httpact.RequestError
			switch {
			case errors.As(err, &re):
				return policy.Decision{}, &unusableError{"request." + re.Field, re.Reason, err}
			case err != nil:
				return policy.Decision{}, err
			case he.err != nil:
				return policy.Decision{}, &unusableError{"credentials", he.err.Error(), he.err} // it names the endpoint
			}
			d := he.rules.Decide(chk.Method, chk.Path, seconds(in.TimeoutS))
			req.NoRedirects = d.NoRedirects
			return d, d.Err
		},
		approval: func() *Question {
			return g.requestQuestion(s.cfg, in.Endpoint, he.endpoint.BaseURL, sent, req)
		},
		streams: []string{"body"},
		execute: func(ctx context.Context, w []io.Writer, _ *atomic.Int64) *ended {
			// w[0] passes every redactor put in effect while the body
			// arrives (followRedactor): it knows the access token the
			// request fetched, learned before it was sent.
			res, err := g.http.Do(ctx, he.endpoint, req, w[0])
			if err != nil {
				// Nothing was sent: a refused path, header or body.
				return &ended{status: StatusFailed, reason: err.Error()}
			}
			// The reason may quote the token endpoint: redacted with the
			// tokens learned during the request. It may quote the server's
			// bytes too (a malformed header line): clipped, once redacted.
			e := &ended{status: httpStatus[res.Status], reason: output.Clip(g.redactString(res.Reason), maxReasonBytes),
				duration: res.Duration, httpStatus: res.HTTPStatus, attempts: res.Attempts, headers: map[string]string{}}
			// Names too: a server may echo anything into a header name.
			for k, v := range res.Headers {
				e.headers[g.redactString(k)] = g.redactString(v)
			}
			return e
		},
		finish: func(e *ended, handle string, s []output.Stream) (any, []output.NamedStream, string, bool) {
			headers, omitted := fitHeaders(e.headers)
			out := &HTTPRequestOutput{Handle: handle, Endpoint: in.Endpoint, Status: e.status, HTTPStatus: e.httpStatus,
				Headers: headers, DurationMS: e.duration.Milliseconds(), Attempts: e.attempts, Body: s[0], Reason: e.reason}
			return out, []output.NamedStream{{Name: "body", Summary: &out.Body}}, describeHTTP(out, method, g.redactString(in.Path), omitted), out.Status != StatusOK
		},
	}, progress, in.WaitS)
}

// A server chooses its response headers, up to net/http's 10 MiB: a
// result keeps at most maxHeaderBytes of each selected name and value and
// maxHeadersBytes of them all (as JSON), and a reason is clipped to
// maxReasonBytes, so that no answer can make the result too large to be
// returned at the smallest result_bytes (4096), its handle with it.
const (
	maxHeaderBytes  = 1024
	maxHeadersBytes = 2048
	maxReasonBytes  = 1024
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

func describeHTTP(out *HTTPRequestOutput, method, path string, omitted int) string {
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
