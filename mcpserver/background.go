package mcpserver

import (
	"context"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/gateway"
)

func init() { toolSets = append(toolSets, addBackgroundTools) }

// actionStatuses are the statuses list_actions can filter by: running,
// and every way a started action ends.
var actionStatuses = []string{"running", "exited", "signaled", "output_limit", "ok", "http_error", "body_limit", "size_limit", "done", "timeout", "cancelled", "denied", "failed"}

// addBackgroundTools adds the tools for actions that go on after their
// call returned: waiting for one, stopping one, listing them.
func addBackgroundTools(s *mcp.Server, env *toolEnv) {
	gw := env.gw
	if gw == nil {
		return
	}
	// Any action tool's result: the action's own shape.
	actionResult := &jsonschema.Schema{Type: "object", AnyOf: []*jsonschema.Schema{
		schemaFor[gateway.SSHExecOutput](), schemaFor[gateway.HTTPRequestOutput](),
		schemaFor[gateway.SSHDownloadOutput](), schemaFor[gateway.SSHUploadOutput](), schemaFor[gateway.SSHExecManyOutput](),
	}}
	mcp.AddTool(s, &mcp.Tool{
		Name:         "action_status",
		OutputSchema: actionResult,
		Description: "Get an action's result by its handle, in the shape of the tool that started it (status running, " +
			"or how it ended), waiting up to wait_s for a running one to end. Cancelling this call ends the wait, " +
			"not the action; cancel_action stops it.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in gateway.ActionStatusInput) (*mcp.CallToolResult, any, error) {
		return toolResult[any](gw.ActionStatus(ctx, in, progress(ctx, req, env)))
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:         "cancel_action",
		OutputSchema: actionResult,
		Description: "Stop a running action by its handle, as cancelling its call would (SSH: the remote command is " +
			"stopped in stages and verified gone), and return its final result.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in gateway.CancelActionInput) (*mcp.CallToolResult, any, error) {
		return toolResult[any](gw.CancelAction(ctx, in))
	})
	mcp.AddTool(s, &mcp.Tool{
		Name: "list_actions",
		Description: "List this server's running actions and its last finished ones, newest first: handle, tool, " +
			"target, command or method and path, status, start and duration.",
		InputSchema: inputSchema[gateway.ListActionsInput](map[string][]string{"status": actionStatuses}),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in gateway.ListActionsInput) (*mcp.CallToolResult, *gateway.ListActionsOutput, error) {
		return toolResult[*gateway.ListActionsOutput](gw.ListActions(ctx, in))
	})
}
