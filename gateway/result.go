package gateway

import (
	"sort"

	"github.com/actiongw/actiongw/internal/output"
)

// How the pipeline completes a kind's result: its text redacted whole,
// its notes added, and the whole fitted into result_bytes. (The texts a
// kind quotes come to it redacted: see Gateway.told.)

// A server chooses what a reason may quote: a reason is clipped to
// maxReasonBytes (with the other bounds of http_request.go, no answer can
// make a result too large to be returned at the smallest result_bytes).
const maxReasonBytes = 1024

// resultAllowance is the part of result_bytes kept for what is added to
// a result after it was measured, in the two places that need one: the
// pipeline fits a result in parts (a fan-out's groups) into result_bytes
// less it, for the notes it adds then (the timeout cap, the audit
// warning, a running action's hints); and a reload's note goes at the
// start of a result's text only when the result, the note and it fit
// (TakeNote), for the JSON-RPC envelope around the result, a long id and
// the note's separator.
const resultAllowance = 512

// result completes r, the result of kind k for the action with handle:
// when k is a fanout, its last parts left out until bare ones fit
// (fitParts); its text, with note after it, redacted; a failed outcome
// record (auditErr) said plainly; its previews shrunk until the response
// fits result_bytes.
func (g *Gateway) result(c *core, k kind, r *result, handle, note string, auditErr error) *ToolResult {
	if f, ok := k.(fanout); ok {
		r = fitParts(f, r, handle, c.server.ResultBytes-resultAllowance)
	}
	what := g.redactString(r.what + note) // it quotes the command or path
	isError := r.isError
	if auditErr != nil {
		// The action ran, but its outcome is not on record: say so plainly.
		what += " WARNING: the action ran, but its outcome could not be written to the audit log (" + g.redactString(auditErr.Error()) + ")."
		isError = true
	}
	text, err := output.BuildResult(output.ResultSpec{Structured: r.structured, What: what, Handle: handle, Streams: r.streams}, c.server.ResultBytes)
	if err != nil {
		return g.failure("%s (%v)", what, err)
	}
	return &ToolResult{Structured: r.structured, Text: text, IsError: isError}
}

// fitParts leaves out the last parts of r (a fan-out's smallest groups),
// as few as it can, so that r fits budget even with no preview; result
// then shrinks the previews until it fits.
func fitParts(f fanout, r *result, handle string, budget int) *result {
	fits := func(k int) bool {
		bare := f.keep(r, k, true)
		_, err := output.BuildResult(output.ResultSpec{Structured: bare.structured, What: bare.what, Handle: handle, Streams: bare.streams}, budget)
		return err == nil
	}
	k := max(0, sort.Search(r.parts+1, func(k int) bool { return !fits(k) })-1)
	return f.keep(r, k, false)
}
