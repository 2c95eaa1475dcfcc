package gateway

import "context"

// result finishes an action's tool result: previews shrink until the
// response fits result_bytes, and a failed outcome record is reported.
func (g *Gateway) result(out any, isError bool, auditErr error, what, handle string, streams ...NamedStream) *ToolResult {
	what = g.red.RedactString(what) // it quotes the command or path
	if auditErr != nil {
		// The action ran, but its outcome is not on record: say so plainly.
		what += " WARNING: the outcome could not be written to the audit log (" + auditErr.Error() + "); further actions are refused."
		isError = true
	}
	text, err := BuildResult(ResultSpec{Structured: out, What: what, Handle: handle, Streams: streams}, g.cfg.Server.ResultBytes)
	if err != nil {
		return g.failure("%s (%v)", what, err)
	}
	return &ToolResult{Structured: out, Text: text, IsError: isError}
}

// ReadOutputInput is the input of the read_output tool.
type ReadOutputInput struct {
	Handle string `json:"handle" jsonschema:"handle of a finished action, from its result"`
	Stream string `json:"stream" jsonschema:"stdout or stderr for ssh_exec, body for http_request"`
	Offset int64  `json:"offset,omitempty" jsonschema:"byte offset in the whole stream; negative counts back from the end"`
	Limit  int    `json:"limit,omitempty" jsonschema:"most bytes to return; capped so the result fits the content limit"`
	From   string `json:"from,omitempty" jsonschema:"start (default) or end: with end, offset counts back from the end of the stream"`
}

// ReadOutput returns a page of a retained stream.
func (g *Gateway) ReadOutput(in ReadOutputInput) *ToolResult {
	var fromEnd bool
	switch in.From {
	case "", "start":
	case "end":
		fromEnd = true
	default:
		return g.failure(`from must be "start" or "end", got %q`, in.From)
	}
	p, err := g.spool.Read(in.Handle, in.Stream, in.Offset, fromEnd, in.Limit)
	if err != nil {
		return g.failure("%v", err)
	}
	text, err := FitPage(p, g.cfg.Server.ResultBytes)
	if err != nil {
		return g.failure("%v", err)
	}
	return &ToolResult{Structured: p, Text: text}
}

// SearchOutputInput is the input of the search_output tool.
type SearchOutputInput struct {
	Handle     string `json:"handle" jsonschema:"handle of a finished action, from its result"`
	Stream     string `json:"stream" jsonschema:"stdout or stderr for ssh_exec, body for http_request"`
	Pattern    string `json:"pattern" jsonschema:"RE2 regular expression, matched line by line"`
	MaxMatches int    `json:"max_matches,omitempty" jsonschema:"most matches to return"`
}

// SearchOutput finds lines matching a pattern in a retained stream.
func (g *Gateway) SearchOutput(ctx context.Context, in SearchOutputInput) *ToolResult {
	r, err := g.spool.Search(ctx, in.Handle, in.Stream, in.Pattern, in.MaxMatches)
	if err != nil {
		return g.failure("%v", err)
	}
	text, err := FitSearch(r, in.Pattern, g.cfg.Server.ResultBytes)
	if err != nil {
		return g.failure("%v", err)
	}
	return &ToolResult{Structured: r, Text: text}
}
