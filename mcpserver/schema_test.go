package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
)

// TestToolSchemaEnums lists the tools through the go-sdk client and checks
// that every closed set of input values is an enum in the schema the
// client sees, and that a value outside it is refused.
func TestToolSchemaEnums(t *testing.T) {
	ctx, cs := sdkSession(t)
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]map[string]any{}
	for _, tool := range tools.Tools {
		raw, _ := json.Marshal(tool.InputSchema)
		var s map[string]any
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		schemas[tool.Name] = s
	}
	tests := []struct {
		tool, property string
		want           []any
	}{
		{"read_output", "stream", []any{"stdout", "stderr", "body", "file", "terminal", "recording"}},
		{"read_output", "from", []any{"start", "end"}},
		{"search_output", "stream", []any{"stdout", "stderr", "body", "file", "terminal", "recording"}},
		{"ssh_upload", "encoding", []any{"utf8", "base64"}},
		{"ssh_upload", "from_stream", []any{"stdout", "stderr", "body", "file", "terminal", "recording"}},
		{"http_request", "method", []any{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}},
	}
	for _, tt := range tests {
		s, ok := schemas[tt.tool]
		if !ok {
			t.Errorf("tools/list has no %s", tt.tool)
			continue
		}
		props, _ := s["properties"].(map[string]any)
		p, _ := props[tt.property].(map[string]any)
		if got := p["enum"]; fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s.%s: got enum %v; want %v", tt.tool, tt.property, got, tt.want)
		}
	}
	for _, name := range []string{"line", "lines", "offset", "limit"} {
		if props, _ := schemas["read_output"]["properties"].(map[string]any); props[name] == nil {
			t.Errorf("read_output has no %q property", name)
		}
	}
	if props, _ := schemas["search_output"]["properties"].(map[string]any); props["context"] == nil {
		t.Errorf("search_output has no context property")
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_output", Arguments: map[string]any{"handle": "x", "stream": "<name>"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError {
		t.Errorf("read_output with stream %q: got %+v; want a tool error", "<name>", res.Content)
	}
}

// sdkSession is a session of the go-sdk's client with the real binary
// serving targetsTOML.
func sdkSession(t *testing.T) (context.Context, *mcp.ClientSession) {
	ctx := testContext(t)
	stderr := &syncbuf.Buffer{}
	client := mcp.NewClient(&mcp.Implementation{Name: "schema-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: serverCmd(t, writeConfig(t, 0, targetsTOML), stderr)}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	t.Cleanup(func() { cs.Close() })
	return ctx, cs
}

// TestToolArgumentsRefused: the agent's arguments are checked against the
// tool's input schema before the tool sees them (mcpserver's addTool, not
// the SDK's, does it): a wrong type, a property the schema does not have,
// a name in another case, a value outside an enum, arguments that are not
// an object, a required one missing. Each is the tool's error, which names
// the schema's complaint, and the session goes on; arguments that pass
// reach the tool.
func TestToolArgumentsRefused(t *testing.T) {
	ctx, cs := sdkSession(t)
	tests := []struct {
		name, tool string
		args       any
		want       string
	}{
		{"wrong type", "read_output", map[string]any{"handle": 5, "stream": "stdout"}, `validating "arguments"`},
		{"unknown property", "ssh_exec", map[string]any{"target": "web1", "command": "true", "sudo_password": "x"}, `validating "arguments"`},
		{"name in another case", "ssh_exec", map[string]any{"Target": "web1", "Command": "true"}, `validating "arguments"`},
		{"outside an enum", "http_request", map[string]any{"endpoint": "api", "method": "TRACE", "path": "/"}, `validating "arguments"`},
		{"not an object", "ssh_exec", json.RawMessage(`["web1","true"]`), `validating "arguments"`},
		{"a string, not an object", "ssh_exec", json.RawMessage(`"true"`), `validating "arguments"`},
		{"required missing", "ssh_exec", map[string]any{"target": "web1"}, `validating "arguments"`},
		{"deep", "read_output", map[string]any{"handle": "x", "stream": "stdout", "x": json.RawMessage(strings.Repeat("[", 900) + strings.Repeat("]", 900))}, `validating "arguments"`},
		{"passes", "read_output", map[string]any{"handle": "x", "stream": "stdout"}, "malformed output handle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args})
			if err != nil {
				t.Fatalf("%s: %v", tt.tool, err)
			}
			text := ""
			for _, c := range res.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					text += tc.Text
				}
			}
			if !res.IsError || !strings.Contains(text, tt.want) {
				t.Fatalf("%s: isError %v, %q; want an error with %q", tt.tool, res.IsError, text, tt.want)
			}
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_targets"}); err != nil {
				t.Fatalf("the session did not go on: %v", err)
			}
		})
	}
}
