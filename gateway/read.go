package gateway

import (
	"context"

	"github.com/actiongw/actiongw/internal/output"
)

// Page is the read_output result and SearchResult the search_output
// result, as package output builds them.
type (
	Page         = output.Page
	SearchResult = output.SearchResult
)

// ReadOutputInput is the input of the read_output tool.
type ReadOutputInput struct {
	Handle string `json:"handle" jsonschema:"handle of a finished action, from its result"`
	Stream string `json:"stream" jsonschema:"stdout or stderr for ssh_exec, body for http_request"`
	Offset int64  `json:"offset,omitempty" jsonschema:"byte offset in the whole stream; negative counts back from the end"`
	Limit  int    `json:"limit,omitempty" jsonschema:"most bytes to return; capped so the result fits the content limit"`
	From   string `json:"from,omitempty" jsonschema:"start (default) or end: with end, offset counts back from the end of the stream"`
}

// ReadOutput returns a page of a retained stream. It waits for its turn
// among reads and searches (max_concurrent_reads) until ctx ends.
func (g *Gateway) ReadOutput(ctx context.Context, in ReadOutputInput) *ToolResult {
	var fromEnd bool
	switch in.From {
	case "", "start":
	case "end":
		fromEnd = true
	default:
		return g.failure(`from must be "start" or "end", got %q`, in.From)
	}
	s, fail := g.ready()
	if fail != nil {
		return fail
	}
	resultBytes := s.core.server.ResultBytes
	p, err := s.core.spool.Read(ctx, in.Handle, in.Stream, in.Offset, fromEnd, in.Limit, resultBytes)
	if err != nil {
		return g.failure("%v", err)
	}
	text, err := output.FitPage(p, resultBytes)
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
	s, fail := g.ready()
	if fail != nil {
		return fail
	}
	r, err := s.core.spool.Search(ctx, in.Handle, in.Stream, in.Pattern, in.MaxMatches)
	if err != nil {
		return g.failure("%v", err)
	}
	text, err := output.FitSearch(r, in.Pattern, s.core.server.ResultBytes)
	if err != nil {
		return g.failure("%v", err)
	}
	return &ToolResult{Structured: r, Text: text}
}
