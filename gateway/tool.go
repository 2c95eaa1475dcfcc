package gateway

import "context"

// Tool is one tool of the gateway as the MCP layer serves it: its name,
// what the model is told of it, its hints, and the call that serves it. In
// and Out are its arguments and its structured result, whose json and
// jsonschema tags are the schemas the model sees. Each tool's file
// declares its own; the MCP layer registers each with one line.
type Tool[In, Out any] struct {
	Name        string
	Description string
	Hints       Hints
	// Asks is set when a call may ask the person at the client first (an
	// approval, a host key): the MCP layer then gives its context an
	// Approver (WithApprover).
	Asks bool
	// Call serves one call; progress is nil when the client asked for
	// none.
	Call func(g *Gateway, ctx context.Context, in In, progress Progress) *ToolResult
}

// Hints are what a tool tells the client about its calls (MCP's tool
// annotations); false says nothing.
type Hints struct {
	ReadOnly    bool // it changes nothing
	Destructive bool // it may change or remove what is there
	Idempotent  bool // calling it again with the same arguments does nothing more
	OpenWorld   bool // it reaches hosts beyond the server
}
