package gateway

import (
	"context"
	"time"

	"github.com/actiongw/actiongw/internal/output"
)

// Page is the read_output result and SearchResult the search_output
// result, as package output builds them.
type (
	Page         = output.Page
	SearchResult = output.SearchResult
)

// ReadOutputTool is the read_output tool.
var ReadOutputTool = &Tool[ReadOutputInput, *Page]{
	Name: "read_output",
	Description: "Read an action's retained output by handle and stream (stdout, stderr, body or file): by line " +
		"(line, lines; lines count from 1) or by byte offset (offset; a negative offset or from=end reads from " +
		"the end). A page cut by its limit ends at a line. Ranges that were not retained are listed in missing.",
	Hints: Hints{ReadOnly: true},
	Call: func(g *Gateway, ctx context.Context, in ReadOutputInput, _ Progress) *ToolResult {
		return g.ReadOutput(ctx, in)
	},
}

// SearchOutputTool is the search_output tool.
var SearchOutputTool = &Tool[SearchOutputInput, *SearchResult]{
	Name: "search_output",
	Description: "Search an action's retained output line by line with an RE2 pattern; returns each matching " +
		"line with its number and offsets, and with context the lines around it (like grep -C).",
	Hints: Hints{ReadOnly: true},
	Call: func(g *Gateway, ctx context.Context, in SearchOutputInput, _ Progress) *ToolResult {
		return g.SearchOutput(ctx, in)
	},
}

// ReadOutputInput is the input of the read_output tool.
type ReadOutputInput struct {
	Handle string  `json:"handle" jsonschema:"handle of an action, from its result or list_actions"`
	Stream string  `json:"stream" jsonschema:"stdout or stderr for ssh_exec, body for http_request, file for ssh_download"`
	Offset int64   `json:"offset,omitempty" jsonschema:"byte offset in the whole stream; negative counts back from the end; not with line"`
	From   string  `json:"from,omitempty" jsonschema:"start (default) or end: with end, offset counts back from the end of the stream; not with line"`
	Line   int64   `json:"line,omitempty" jsonschema:"first line to read, counting from 1, instead of offset"`
	Lines  int     `json:"lines,omitempty" jsonschema:"with line: how many lines to read, at most 10000 (default: as many as fit limit)"`
	Limit  int     `json:"limit,omitempty" jsonschema:"most bytes to return; capped so the result fits the content limit"`
	WaitS  float64 `json:"wait_s,omitempty" jsonschema:"for a running action: seconds to wait, at most 600, for bytes at or past offset when none have arrived yet, or for the end (a bounded tail -f)"`
}

// ReadOutput returns a page of a retained stream, by byte offset or by
// line. It waits for its turn among reads and searches
// (max_concurrent_reads) until ctx ends. On a running action, with
// wait_s, a page that would be empty waits for bytes or the end.
func (g *Gateway) ReadOutput(ctx context.Context, in ReadOutputInput) *ToolResult {
	s, fail := g.ready()
	if fail != nil {
		return fail
	}
	resultBytes := s.core.server.ResultBytes
	var fromEnd bool
	switch in.From {
	case "", "start":
	case "end":
		fromEnd = true
	default:
		return g.failure(`from must be "start" or "end", got %q`, output.Clip(in.From, 40))
	}
	switch {
	case in.Line != 0 && (in.Offset != 0 || in.From != ""):
		return g.failure("give either line (and lines) or offset (and from), not both: line reads from the start of a line, offset from a byte")
	case in.Line < 0:
		return g.failure("line must be 1 or more (lines count from 1); to read from the end, use offset with from=end")
	case in.Lines != 0 && in.Line == 0:
		return g.failure(`lines needs line, the first line to read: e.g. "line":1,"lines":%d`, max(in.Lines, 1))
	case in.Lines < 0:
		return g.failure("lines must be 1 or more")
	case in.WaitS < 0:
		return g.failure("wait_s must be 0 or more")
	}
	read := func() (*Page, error) {
		if in.Line > 0 {
			return s.core.spool.ReadLines(ctx, in.Handle, in.Stream, in.Line, in.Lines, in.Limit, resultBytes)
		}
		return s.core.spool.Read(ctx, in.Handle, in.Stream, in.Offset, fromEnd, in.Limit, resultBytes)
	}
	p, err := g.readWaiting(ctx, in.Handle, min(seconds(in.WaitS), maxWait), read)
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
	Handle     string `json:"handle" jsonschema:"handle of an action, from its result or list_actions"`
	Stream     string `json:"stream" jsonschema:"stdout or stderr for ssh_exec, body for http_request, file for ssh_download"`
	Pattern    string `json:"pattern" jsonschema:"RE2 regular expression, matched line by line"`
	MaxMatches int    `json:"max_matches,omitempty" jsonschema:"most matches to return (default 20, at most 200)"`
	Context    int    `json:"context,omitempty" jsonschema:"lines to return before and after each match, 0 to 10, like grep -C"`
}

// SearchOutput finds lines matching a pattern in a retained stream.
func (g *Gateway) SearchOutput(ctx context.Context, in SearchOutputInput) *ToolResult {
	s, fail := g.ready()
	if fail != nil {
		return fail
	}
	if in.Context < 0 || in.Context > output.MaxContextLines {
		return g.failure("context must be 0 to %d lines, got %d", output.MaxContextLines, in.Context)
	}
	r, err := s.core.spool.Search(ctx, in.Handle, in.Stream, in.Pattern, in.MaxMatches, in.Context)
	if err != nil {
		return g.failure("%v", err)
	}
	text, err := output.FitSearch(r, in.Pattern, s.core.server.ResultBytes)
	if err != nil {
		return g.failure("%v", err)
	}
	return &ToolResult{Structured: r, Text: text}
}

// rereadEvery paces the reads of a waiting read_output whose wake-up
// brought nothing at its offset: bytes arrive in many small writes, and
// bytes elsewhere (another stream, or held back by the redactor) wake it
// too.
const rereadEvery = 20 * time.Millisecond

// readWaiting reads a page; when it is an empty page of a running action,
// it waits up to wait for bytes or the action's end and reads again.
func (g *Gateway) readWaiting(ctx context.Context, handle string, wait time.Duration, read func() (*Page, error)) (*Page, error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var pace time.Time // no read again before this
	for woke := false; ; woke = true {
		// Taken before the read, so that bytes arriving between the read
		// and the wait are not missed.
		var changed, done <-chan struct{}
		act := g.actions.get(handle)
		if act != nil {
			changed, done = act.changed.wait(), act.done
		}
		p, err := read()
		if err != nil || wait <= 0 || act == nil || !p.Running || p.Data != "" || len(p.Missing) > 0 {
			return p, err
		}
		if woke {
			pace = time.Now().Add(rereadEvery)
		}
		select {
		case <-changed:
		case <-done:
		case <-timer.C:
			return p, nil
		case <-ctx.Done():
			return p, nil
		}
		if d := time.Until(pace); d > 0 {
			select {
			case <-time.After(d):
			case <-done:
			case <-timer.C:
				return p, nil
			case <-ctx.Done():
				return p, nil
			}
		}
	}
}
