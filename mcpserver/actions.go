package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/gateway"
)

func init() { toolSets = append(toolSets, addGatewayTools) }

// gatewayTools are the tools the gateway serves, each from the
// descriptor in its tool's file: a new tool is one line here.
var gatewayTools = []func(*mcp.Server, *toolEnv){
	serve(gateway.SSHExecTool),
	serve(gateway.SSHExecManyTool),
	serve(gateway.HTTPRequestTool),
	serve(gateway.SSHDownloadTool),
	serve(gateway.SSHUploadTool),
	serve(gateway.SSHSessionStartTool),
	serve(gateway.SSHSessionSendTool),
	serve(gateway.ReadOutputTool),
	serve(gateway.SearchOutputTool),
	serve(gateway.ActionStatusTool),
	serve(gateway.CancelActionTool),
	serve(gateway.ListActionsTool),
}

// addGatewayTools adds the tools that run and inspect actions; they need
// a gateway, so a session without one has only the info tools.
func addGatewayTools(s *mcp.Server, env *toolEnv) {
	if env.gw == nil {
		return
	}
	for _, add := range gatewayTools {
		add(s, env)
	}
}

// The closed sets of input values, by tool and argument: jsonschema struct
// tags cannot say enum. httpMethods is what config accepts in an
// endpoint's methods; actionStatuses are the statuses list_actions can
// filter by: running, and every way a started action ends.
var (
	streamNames    = []string{"stdout", "stderr", "body", "file", "terminal", "recording"}
	httpMethods    = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
	actionStatuses = []string{"running", "exited", "signaled", "output_limit", "ok", "http_error", "body_limit", "size_limit", "done", "timeout", "cancelled", "denied", "failed"}
	inputEnums     = map[string]map[string][]string{
		"http_request":  {"method": httpMethods},
		"ssh_upload":    {"encoding": {"utf8", "base64"}, "from_stream": streamNames},
		"read_output":   {"stream": streamNames, "from": {"start", "end"}},
		"search_output": {"stream": streamNames},
		"list_actions":  {"status": actionStatuses},
	}
)

// outputSchemas are the result schemas the SDK cannot infer, by tool:
// action_status and cancel_action return any action tool's result, in
// that action's own shape.
var outputSchemas = map[string]func() *jsonschema.Schema{
	"action_status": actionResult,
	"cancel_action": actionResult,
}

func actionResult() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", AnyOf: []*jsonschema.Schema{
		schemaFor[gateway.SSHExecOutput](), schemaFor[gateway.HTTPRequestOutput](),
		schemaFor[gateway.SSHDownloadOutput](), schemaFor[gateway.SSHUploadOutput](), schemaFor[gateway.SSHExecManyOutput](),
		schemaFor[gateway.SSHSessionOutput](),
	}}
}

// serve registers the gateway's tool t: its schemas (with their enums),
// its hints, progress for its calls, and for a tool whose calls may ask
// the person at the client, the call's approver.
func serve[In, Out any](t *gateway.Tool[In, Out]) func(*mcp.Server, *toolEnv) {
	return func(s *mcp.Server, env *toolEnv) {
		tool := &mcp.Tool{Name: t.Name, Description: t.Description, Annotations: annotations(t.Hints)}
		if enums := inputEnums[t.Name]; enums != nil {
			tool.InputSchema = inputSchema[In](enums)
		}
		if schema := outputSchemas[t.Name]; schema != nil {
			tool.OutputSchema = schema()
		}
		restore := restorer[In](t.Name)
		addTool(s, tool, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
			if restore != nil {
				if err := restore(req, &in); err != nil {
					var zero Out
					return nil, zero, err
				}
			}
			call := func(ctx context.Context) *gateway.ToolResult { return t.Call(env.gw, ctx, in, progress(ctx, req, env)) }
			if t.Asks {
				return runAction[Out](ctx, env, req, call)
			}
			return toolResult[Out](call(ctx))
		})
	}
}

// annotations are MCP's annotations for hints; a hint not given is left
// out (for destructive and open world, whose absence means true, too).
func annotations(h gateway.Hints) *mcp.ToolAnnotations {
	a := &mcp.ToolAnnotations{ReadOnlyHint: h.ReadOnly, IdempotentHint: h.Idempotent}
	if h.Destructive {
		a.DestructiveHint = ptr(true)
	}
	if h.OpenWorld {
		a.OpenWorldHint = ptr(true)
	}
	return a
}

// inputSchema is the schema the SDK would infer for In, with the named
// string properties closed to the given values.
func inputSchema[In any](enums map[string][]string) *jsonschema.Schema {
	s := schemaFor[In]()
	for name, values := range enums {
		p := s.Properties[name]
		if p == nil {
			panic(fmt.Sprintf("input schema: no property %q", name))
		}
		for _, v := range values {
			p.Enum = append(p.Enum, v)
		}
	}
	return s
}

// schemaFor is the schema the SDK would infer for T.
func schemaFor[T any]() *jsonschema.Schema { return schemaOf(reflect.TypeFor[T]()) }

// schemaOf is the schema the SDK would infer for t.
func schemaOf(t reflect.Type) *jsonschema.Schema {
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{})
	if err != nil {
		panic(err) // a Go type the SDK could not serve either
	}
	return s
}

// runAction runs an action tool's call with the call's approver, and
// returns the question the call must come back with the answer to, or the
// result.
func runAction[Out any](ctx context.Context, env *toolEnv, req *mcp.CallToolRequest, call func(context.Context) *gateway.ToolResult) (*mcp.CallToolResult, Out, error) {
	a := env.askerFor(req)
	r := call(gateway.WithApprover(ctx, a))
	if res := a.inputRequired(); res != nil {
		var zero Out
		return res, zero, nil
	}
	return toolResult[Out](r)
}

// toolResult turns a gateway result into the SDK's: a failure without
// structured output becomes an error, which the SDK returns as an isError
// result with that text.
func toolResult[Out any](r *gateway.ToolResult) (*mcp.CallToolResult, Out, error) {
	var zero Out
	out, ok := r.Structured.(Out)
	if !ok {
		return nil, zero, errors.New(r.Text)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.Text}}, IsError: r.IsError}, out, nil
}

// progress reports an action's bytes when the caller sent a progress token;
// the gateway calls it at most a few times a second.
func progress(ctx context.Context, req *mcp.CallToolRequest, env *toolEnv) gateway.Progress {
	token := req.Params.GetProgressToken()
	if token == nil {
		return nil
	}
	// Each notification's progress is above the last, as the spec wants:
	// the reports of a wait for the console count up, and the bytes that
	// follow count from above them.
	var waited float64
	return func(p gateway.ProgressReport) {
		if p.Waiting {
			waited++
			params := &mcp.ProgressNotificationParams{ProgressToken: token, Progress: waited,
				Message: fmt.Sprintf("waiting for the person's answer in the console (actiongw console) for %v", p.Elapsed.Round(time.Second))}
			if err := req.Session.NotifyProgress(ctx, params); err != nil {
				env.log.Debug("progress not sent", "error", err)
			}
			return
		}
		base := 0.0
		if waited > 0 {
			base = waited + 1
		}
		params := &mcp.ProgressNotificationParams{ProgressToken: token, Progress: base + float64(p.Done),
			Message: fmt.Sprintf("%d bytes received after %v", p.Done, p.Elapsed.Round(time.Millisecond))}
		if p.Total > 0 {
			params.Total = base + float64(p.Total)
			params.Message = fmt.Sprintf("%d of %s done after %v", p.Done, count(int(p.Total), "target"), p.Elapsed.Round(time.Millisecond))
		}
		err := req.Session.NotifyProgress(ctx, params)
		if err != nil {
			env.log.Debug("progress not sent", "error", err)
		}
	}
}

func ptr[T any](v T) *T { return &v }
