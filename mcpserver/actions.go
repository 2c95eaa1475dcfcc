package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/gateway"
)

func init() { toolSets = append(toolSets, addActionTools) }

// addActionTools adds the tools that run and inspect actions; they need a
// gateway, so a session without one has only the info tools.
func addActionTools(s *mcp.Server, env *toolEnv) {
	gw := env.gw
	if gw == nil {
		return
	}
	mcp.AddTool(s, &mcp.Tool{
		Name: "ssh_exec",
		Description: "Run a shell command on a configured SSH target (see list_targets). Returns status, exit code, " +
			"a bounded preview of stdout and stderr, byte and line counts, and a handle: use read_output and " +
			"search_output with it for the rest. Credentials are injected by the server and never shown.",
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true), DestructiveHint: ptr(true)},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in gateway.SSHExecInput) (*mcp.CallToolResult, *gateway.SSHExecOutput, error) {
		return toolResult[*gateway.SSHExecOutput](gw.SSHExec(ctx, in, progress(ctx, req, env)))
	})
	mcp.AddTool(s, &mcp.Tool{
		Name: "http_request",
		Description: "Send an HTTP request to a configured endpoint (see list_targets), under its base URL. Returns status, " +
			"selected headers, a bounded preview of the body and a handle for read_output and search_output. " +
			"Credentials are injected by the server and never shown.",
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in gateway.HTTPRequestInput) (*mcp.CallToolResult, *gateway.HTTPRequestOutput, error) {
		return toolResult[*gateway.HTTPRequestOutput](gw.HTTPRequest(ctx, in, progress(ctx, req, env)))
	})
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(s, &mcp.Tool{
		Name: "read_output",
		Description: "Read a byte range of an action's retained output by handle and stream (stdout, stderr or body). " +
			"Offsets are in the whole stream; a negative offset or from=end reads from the end. Ranges that were not " +
			"retained are listed in missing.",
		Annotations: readOnly,
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in gateway.ReadOutputInput) (*mcp.CallToolResult, *gateway.Page, error) {
		return toolResult[*gateway.Page](gw.ReadOutput(ctx, in))
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "search_output",
		Description: "Search an action's retained output line by line with an RE2 pattern; returns offsets, line numbers and snippets.",
		Annotations: readOnly,
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in gateway.SearchOutputInput) (*mcp.CallToolResult, *gateway.SearchResult, error) {
		return toolResult[*gateway.SearchResult](gw.SearchOutput(ctx, in))
	})
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
	return func(n int64, elapsed time.Duration) {
		err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token,
			Progress:      float64(n),
			Message:       fmt.Sprintf("%d bytes received after %v", n, elapsed.Round(time.Millisecond)),
		})
		if err != nil {
			env.log.Debug("progress not sent", "error", err)
		}
	}
}

func ptr[T any](v T) *T { return &v }
