package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAddToolRefusesDefaults: addTool does not apply schema defaults, so
// a tool whose input or output schema has one, at any depth the schema's
// defaults would be applied, is refused when it is added, not served
// without them.
func TestAddToolRefusesDefaults(t *testing.T) {
	type inner struct {
		N int `json:"n"`
	}
	type in struct {
		A     string `json:"a"`
		Inner inner  `json:"inner"`
	}
	withDefault := func(path ...string) *jsonschema.Schema {
		s := schemaFor[in]()
		p := s
		for _, name := range path {
			p = p.Properties[name]
		}
		p.Default = json.RawMessage(`1`)
		return s
	}
	h := func(context.Context, *mcp.CallToolRequest, in) (*mcp.CallToolResult, struct{}, error) {
		return nil, struct{}{}, nil
	}
	for _, tt := range []struct {
		name string
		tool *mcp.Tool
	}{
		{"input", &mcp.Tool{Name: "t", InputSchema: withDefault("a")}},
		{"nested input", &mcp.Tool{Name: "t", InputSchema: withDefault("inner", "n")}},
		{"output", &mcp.Tool{Name: "t", OutputSchema: withDefault("inner")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "defaults") {
					t.Fatalf("addTool with a default: recovered %v; want a panic naming defaults", r)
				}
			}()
			addTool(mcp.NewServer(&mcp.Implementation{Name: "t"}, nil), tt.tool, h)
		})
	}
	addTool(mcp.NewServer(&mcp.Implementation{Name: "t"}, nil), &mcp.Tool{Name: "t"}, h) // none: added
}

// TestAddToolOutput: the output is checked against its schema (a value
// the schema refuses is the call's error, never sent as structured
// content); a nil pointer is served as its element's zero value, and an
// Out of any left nil as no structured content, as the SDK does.
func TestAddToolOutput(t *testing.T) {
	type out struct {
		Status string `json:"status"`
	}
	type none struct{}
	s := mcp.NewServer(&mcp.Implementation{Name: "t"}, nil)
	closed := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"status": {Type: "string", Enum: []any{"ok"}}}}
	addTool(s, &mcp.Tool{Name: "refused", OutputSchema: closed}, func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, out, error) {
		return nil, out{Status: "not ok"}, nil
	})
	addTool(s, &mcp.Tool{Name: "nil"}, func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, *out, error) {
		return nil, nil, nil
	})
	addTool(s, &mcp.Tool{Name: "any"}, func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "text only"}}}, nil, nil
	})
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refused"}); err == nil || !strings.Contains(err.Error(), "validating tool output") {
		t.Errorf("an output its schema refuses: %v; want the call's error naming the check", err)
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nil"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(r.StructuredContent); string(got) != `{"status":""}` {
		t.Errorf("a nil *out: structured content %s; want the zero out", got)
	}
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "any"})
	if err != nil {
		t.Fatal(err)
	}
	if r.StructuredContent != nil || len(r.Content) != 1 {
		t.Errorf("an Out of any left nil: structured %v, %d contents; want none and the text", r.StructuredContent, len(r.Content))
	}
}
