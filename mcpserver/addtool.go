package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
)

// addTool is mcp.AddTool with its contract and less of its garbage. Like
// the SDK it serves the schemas inferred for In and Out (unless t has
// its own), refuses arguments its input schema refuses ("validating
// \"arguments\": ..."), decodes them into In with field names matched
// exactly, returns the handler's error as the tool's error (a
// *jsonrpc.Error as itself), and checks the output against its schema
// before it goes out as the structured content.
//
// The SDK does that in four passes of JSON decoding a call (the
// arguments into a map and back, into In, the output into a map and back),
// each through a json.Decoder that allocates a 32 KiB buffer: about a
// quarter of all serve allocated under the soak's load. addTool parses
// in place with the same library (segmentio/encoding/json) and decodes
// each of arguments and output once. The SDK's passes back to JSON are
// there to apply the schemas' defaults, which ours have none of
// (noDefaults, checked here, panics otherwise): the structured content is
// the output as marshalled, its fields in the struct's order.
func addTool[In, Out any](s *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	tt := *t
	if tt.InputSchema == nil {
		tt.InputSchema = schemaFor[In]()
	}
	// A pointer's schema is its element's, and a nil one is served as the
	// element's zero value, as the SDK does.
	var zero any
	if rt := reflect.TypeFor[Out](); rt.Kind() == reflect.Pointer {
		zero = reflect.Zero(rt.Elem()).Interface()
		if tt.OutputSchema == nil {
			tt.OutputSchema = schemaOf(rt.Elem())
		}
	}
	if tt.OutputSchema == nil && reflect.TypeFor[Out]() != reflect.TypeFor[any]() {
		tt.OutputSchema = schemaFor[Out]()
	}
	input := resolved(tt.Name, tt.InputSchema)
	var output *jsonschema.Resolved // none for an Out of any without a schema, as in the SDK
	if tt.OutputSchema != nil {
		output = resolved(tt.Name, tt.OutputSchema)
	}
	s.AddTool(&tt, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		in, err := arguments[In](req.Params.Arguments, input)
		if err != nil {
			return toolError(err), nil
		}
		res, out, err := h(ctx, req, in)
		if err != nil {
			if werr, ok := err.(*jsonrpc.Error); ok {
				return nil, werr
			}
			return toolError(err), nil
		}
		if res == nil {
			res = &mcp.CallToolResult{}
		}
		if res.InputRequests != nil { // the call comes back with answers; no content with them
			return res, nil
		}
		var value any = out
		if zero != nil && reflect.ValueOf(out).IsNil() {
			value = zero
		}
		if value == nil { // an Out of any, left nil: no structured content
			return res, nil
		}
		data, err := json.Marshal(value)
		if err != nil {
			return nil, fmt.Errorf("marshaling output: %w", err)
		}
		if output != nil {
			var v any
			if _, err := segjson.Parse(data, &v, segjson.DontMatchCaseInsensitiveStructFields); err != nil {
				return nil, fmt.Errorf("validating tool output: %w", err)
			}
			if err := output.Validate(&v); err != nil {
				return nil, fmt.Errorf("validating tool output: %w", err)
			}
		}
		res.StructuredContent = json.RawMessage(data)
		if res.Content == nil {
			res.Content = []mcp.Content{&mcp.TextContent{Text: string(data)}}
		}
		return res, nil
	})
}

// arguments validates a call's arguments against the input schema and
// decodes them into In; none are an empty object.
func arguments[In any](args json.RawMessage, schema *jsonschema.Resolved) (In, error) {
	var in In
	m := map[string]any{}
	if len(args) > 0 {
		if _, err := segjson.Parse(args, &m, segjson.DontMatchCaseInsensitiveStructFields); err != nil {
			return in, fmt.Errorf("validating \"arguments\": unmarshaling arguments: %w", err)
		}
	}
	var v any = m
	if err := schema.Validate(&v); err != nil {
		return in, fmt.Errorf("validating \"arguments\": %w", err)
	}
	if len(args) > 0 {
		if _, err := segjson.Parse(args, &in, segjson.DontMatchCaseInsensitiveStructFields); err != nil {
			return in, err
		}
	}
	return in, nil
}

// toolError is err as a tool's result.
func toolError(err error) *mcp.CallToolResult {
	var r mcp.CallToolResult
	r.SetError(err)
	return &r
}

// resolved is schema resolved as the SDK resolves it, after noDefaults.
func resolved(tool string, schema any) *jsonschema.Resolved {
	s := schema.(*jsonschema.Schema)
	if !noDefaults(s) {
		panic(fmt.Sprintf("addTool %q: a schema with defaults, which addTool does not apply", tool))
	}
	r, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		panic(fmt.Sprintf("addTool %q: %v", tool, err))
	}
	return r
}

// noDefaults reports whether no property of s, at any depth the schema's
// ApplyDefaults follows (properties of properties), has a default.
func noDefaults(s *jsonschema.Schema) bool {
	for _, p := range s.Properties {
		if p.Default != nil || !noDefaults(p) {
			return false
		}
	}
	return true
}
