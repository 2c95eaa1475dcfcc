package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
)

// TestToolSchemaEnums lists the tools through the go-sdk client and checks
// that every closed set of input values is an enum in the schema the
// client sees, and that a value outside it is refused.
func TestToolSchemaEnums(t *testing.T) {
	ctx := testContext(t)
	stderr := &syncbuf.Buffer{}
	client := mcp.NewClient(&mcp.Implementation{Name: "schema-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: serverCmd(t, writeConfig(t, 0, targetsTOML), stderr)}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	defer cs.Close()
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
