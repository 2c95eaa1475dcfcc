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
