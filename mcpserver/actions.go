package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
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
			"byte and line counts, and the first and last lines of stdout and stderr (in the text and in " +
			"structuredContent), with a handle: use read_output and search_output with it for the rest. " +
			"Credentials are injected by the server and never shown.",
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true), DestructiveHint: ptr(true)},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in gateway.SSHExecInput) (*mcp.CallToolResult, *gateway.SSHExecOutput, error) {
		return runAction[*gateway.SSHExecOutput](ctx, env, req, func(ctx context.Context) *gateway.ToolResult {
			return gw.SSHExec(ctx, in, progress(ctx, req, env))
		})
	})
	mcp.AddTool(s, &mcp.Tool{
		Name: "ssh_exec_many",
		Description: "Run one shell command on many SSH targets (names, globs such as web-*, or a group; see list_targets), " +
			"in parallel. Policy is checked on every target first: if any refuses the command, nothing runs. Returns a " +
			"summary, the results grouped (targets whose status, exit code, stdout and stderr are identical are shown " +
			"once, the largest group first) and each target's handle for action_status, read_output and search_output.",
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true), DestructiveHint: ptr(true)},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in gateway.SSHExecManyInput) (*mcp.CallToolResult, *gateway.SSHExecManyOutput, error) {
		return runAction[*gateway.SSHExecManyOutput](ctx, env, req, func(ctx context.Context) *gateway.ToolResult {
			return gw.SSHExecMany(ctx, in, progress(ctx, req, env))
		})
	})
	mcp.AddTool(s, &mcp.Tool{
		Name: "http_request",
		Description: "Send an HTTP request to a configured endpoint (see list_targets), under its base URL. Returns status, " +
			"selected headers, the first and last lines of the body and a handle for read_output and search_output. " +
			"Credentials are injected by the server and never shown.",
		InputSchema: inputSchema[gateway.HTTPRequestInput](map[string][]string{"method": httpMethods}),
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in gateway.HTTPRequestInput) (*mcp.CallToolResult, *gateway.HTTPRequestOutput, error) {
		return runAction[*gateway.HTTPRequestOutput](ctx, env, req, func(ctx context.Context) *gateway.ToolResult {
			return gw.HTTPRequest(ctx, in, progress(ctx, req, env))
		})
	})
	mcp.AddTool(s, &mcp.Tool{
		Name: "ssh_download",
		Description: "Read a file from a configured SSH target over SFTP, within the target's allow_paths. Returns the " +
			"file's size, mode, mtime, bytes read and sha256, and the first and last lines of its content (a binary " +
			"file is described, not shown), with a handle: read_output and search_output with stream file give the " +
			"rest, and ssh_upload with from_handle copies it to a target without it passing through the model.",
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true), ReadOnlyHint: true},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in gateway.SSHDownloadInput) (*mcp.CallToolResult, *gateway.SSHDownloadOutput, error) {
		return runAction[*gateway.SSHDownloadOutput](ctx, env, req, func(ctx context.Context) *gateway.ToolResult {
			return gw.SSHDownload(ctx, in, progress(ctx, req, env))
		})
	})
	mcp.AddTool(s, &mcp.Tool{
		Name: "ssh_upload",
		Description: "Write a file on a configured SSH target over SFTP, within the target's allow_paths, atomically: " +
			"a temporary file in the same directory is written, synced and renamed over the path, so the file is " +
			"never half-written. Give content (utf8 or base64), or from_handle and from_stream to send an earlier " +
			"action's stream kept whole (an HTTP body, a downloaded file). An existing file is replaced only with " +
			"overwrite. Returns the bytes sent and their sha256.",
		InputSchema: inputSchema[gateway.SSHUploadInput](map[string][]string{"encoding": {"utf8", "base64"}, "from_stream": streamNames}),
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true), DestructiveHint: ptr(true)},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in gateway.SSHUploadInput) (*mcp.CallToolResult, *gateway.SSHUploadOutput, error) {
		return runAction[*gateway.SSHUploadOutput](ctx, env, req, func(ctx context.Context) *gateway.ToolResult {
			return gw.SSHUpload(ctx, in, progress(ctx, req, env))
		})
	})
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(s, &mcp.Tool{
		Name: "read_output",
		Description: "Read an action's retained output by handle and stream (stdout, stderr, body or file): by line " +
			"(line, lines; lines count from 1) or by byte offset (offset; a negative offset or from=end reads from " +
			"the end). A page cut by its limit ends at a line. Ranges that were not retained are listed in missing.",
		InputSchema: inputSchema[gateway.ReadOutputInput](map[string][]string{"stream": streamNames, "from": {"start", "end"}}),
		Annotations: readOnly,
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in gateway.ReadOutputInput) (*mcp.CallToolResult, *gateway.Page, error) {
		return toolResult[*gateway.Page](gw.ReadOutput(ctx, in))
	})
	mcp.AddTool(s, &mcp.Tool{
		Name: "search_output",
		Description: "Search an action's retained output line by line with an RE2 pattern; returns each matching " +
			"line with its number and offsets, and with context the lines around it (like grep -C).",
		InputSchema: inputSchema[gateway.SearchOutputInput](map[string][]string{"stream": streamNames}),
		Annotations: readOnly,
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in gateway.SearchOutputInput) (*mcp.CallToolResult, *gateway.SearchResult, error) {
		return toolResult[*gateway.SearchResult](gw.SearchOutput(ctx, in))
	})
}

// The closed sets of input values. httpMethods is what config accepts in
// an endpoint's methods.
var (
	streamNames = []string{"stdout", "stderr", "body", "file"}
	httpMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
)

// inputSchema is the schema the SDK would infer for In, with the named
// string properties closed to the given values: jsonschema struct tags
// cannot say enum.
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
func schemaFor[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
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
	return func(p gateway.ProgressReport) {
		params := &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(p.Done),
			Message: fmt.Sprintf("%d bytes received after %v", p.Done, p.Elapsed.Round(time.Millisecond))}
		if p.Total > 0 {
			params.Total = float64(p.Total)
			params.Message = fmt.Sprintf("%d of %s done after %v", p.Done, count(int(p.Total), "target"), p.Elapsed.Round(time.Millisecond))
		}
		err := req.Session.NotifyProgress(ctx, params)
		if err != nil {
			env.log.Debug("progress not sent", "error", err)
		}
	}
}

func ptr[T any](v T) *T { return &v }
