package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/actiongw/actiongw/httpact"
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
}

// HTTPRequestOutput is the structured result of http_request.
type HTTPRequestOutput struct {
	Handle   string `json:"handle"`
	Endpoint string `json:"endpoint"`
	// Status is ok, http_error, body_limit, cancelled, timeout or failed.
	Status     string            `json:"status"`
	HTTPStatus int               `json:"http_status,omitempty"`
	Headers    map[string]string `json:"headers"`
	DurationMS int64             `json:"duration_ms"`
	Attempts   int               `json:"attempts"`
	Body       StreamSummary     `json:"body"`
	Reason     string            `json:"reason,omitempty"`
}

// HTTPRequest sends one request to a configured endpoint.
func (g *Gateway) HTTPRequest(ctx context.Context, in HTTPRequestInput, progress Progress) *ToolResult {
	he, ok := g.httpEndpoints[in.Endpoint]
	if !ok {
		return g.failure("unknown HTTP endpoint %q; known HTTP endpoints: %s (see list_targets)", in.Endpoint, strings.Join(g.targetNames(false), ", "))
	}
	method := strings.ToUpper(in.Method)
	// The audit keeps no query string: it may carry a credential.
	intent := &AuditRecord{Tool: "http_request", Target: in.Endpoint, Method: method, Path: strings.SplitN(in.Path, "?", 2)[0]}
	// A first check on the path as given, so a denial is audited as one;
	// httpact checks again on the normalized path.
	if err := he.requests.Check(method, in.Path); err != nil {
		var de *policy.DeniedError
		errors.As(err, &de)
		g.deny(intent, "denied", de.Rule, de.Reason)
		return g.failure("%v", err)
	}
	if he.err != nil {
		g.deny(intent, "failed", "credentials", he.err.Error())
		return g.failure("cannot use endpoint %q: %v", in.Endpoint, he.err)
	}
	c := g.cfg.HTTP[in.Endpoint]
	timeout, _ := policy.Timeout(seconds(in.TimeoutS), c.Timeout, c.MaxTimeout)
	req := httpact.Request{Method: method, Path: in.Path, Headers: in.Headers, Body: []byte(in.Body), Timeout: timeout}
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

	actx, act, err := g.begin(ctx, intent)
	if err != nil {
		return g.failure("%v", err)
	}
	defer act.done()
	body := act.out.Capture("body", g.red, CaptureLimits{HeadBytes: g.cfg.Server.HeadBytes, TailBytes: g.cfg.Server.TailBytes})
	w := &countingWriter{w: body, progress: progress, start: act.start}
	res, doErr := g.http.Do(actx, he.endpoint, req, w)
	act.out.Finish()

	out := HTTPRequestOutput{Handle: act.out.Handle(), Endpoint: in.Endpoint, Body: body.Summary(), Headers: map[string]string{}}
	// An error means nothing was sent: a refused path, header or body.
	switch {
	case doErr != nil:
		out.Status, out.Reason = "failed", doErr.Error()
	default:
		out.Status, out.HTTPStatus, out.Attempts = string(res.Status), res.HTTPStatus, res.Attempts
		out.DurationMS, out.Reason = res.Duration.Milliseconds(), res.Reason
		for k, v := range res.Headers {
			out.Headers[k] = g.red.RedactString(v)
		}
		if res.Status == httpact.StatusCancelled {
			out.Reason = g.cancelReason(actx)
		}
		if res.BodyCut {
			out.Reason = strings.TrimSpace(out.Reason + fmt.Sprintf(" the body was cut after %d bytes (retention budget plus drain_cap)", res.BodyBytes))
		}
	}
	out.Reason = g.red.RedactString(out.Reason)
	auditErr := g.audit.Append(&AuditRecord{
		Kind: "outcome", Handle: out.Handle, Tool: "http_request", Target: in.Endpoint,
		Status: out.Status, HTTPStatus: out.HTTPStatus, DurationMS: out.DurationMS, Reason: out.Reason,
		Streams: map[string]AuditStream{"body": {Bytes: out.Body.Bytes, SHA256: out.Body.SHA256}},
	})
	isError := out.Status != string(httpact.StatusOK)
	return g.result(&out, isError, auditErr, describeHTTP(&out, method, in.Path), out.Handle, NamedStream{"body", &out.Body})
}

func describeHTTP(out *HTTPRequestOutput, method, path string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "http_request %s %s on %s: %s", method, clip(path, 200), out.Endpoint, out.Status)
	if out.HTTPStatus != 0 {
		fmt.Fprintf(&b, ", HTTP %d", out.HTTPStatus)
	}
	fmt.Fprintf(&b, " after %d ms and %d attempt(s).", out.DurationMS, out.Attempts)
	if out.Reason != "" {
		fmt.Fprintf(&b, " Reason: %s.", out.Reason)
	}
	return b.String()
}

// countingWriter counts what passes and reports it to progress at most
// every progressInterval.
type countingWriter struct {
	w        io.Writer
	n        int64
	progress Progress
	start    time.Time
	last     time.Time
}

const progressInterval = 250 * time.Millisecond

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	if c.progress != nil {
		if now := time.Now(); now.Sub(c.last) >= progressInterval {
			c.last = now
			c.progress(c.n, now.Sub(c.start))
		}
	}
	return c.w.Write(p)
}
