package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/policy"
)

// action is one call of an action tool as the pipeline runs it. The
// pipeline is what every kind of action shares; the fields are what differs.
type action struct {
	// intent is the audit intent: tool, target and what is asked (a
	// command, or a method and a path).
	intent audit.Record
	// check decides whether the action may run: a *policy.DeniedError
	// denies it, an *unusableError refuses it for a reason of the target
	// or the request (a secret that did not load, stdin over the limit).
	check func() error
	// asked, timeout and maxTimeout are the call's timeout_s and the
	// target's timeout and max_timeout.
	asked, timeout, maxTimeout time.Duration
	// streams names the streams execute writes, in order.
	streams []string
	// execute runs the action within timeout, writing each stream into
	// the writer at its index, and says how it ended.
	execute func(ctx context.Context, timeout time.Duration, w []io.Writer) *ended
	// finish builds the tool's structured result from how the action
	// ended and its streams, with the streams it holds for shrinking, a
	// sentence on what ran, and whether the call failed.
	finish func(e *ended, handle string, streams []output.Stream) (structured any, named []output.NamedStream, what string, isError bool)
}

// ended is how an action ended: what the audit outcome records, less the
// streams.
type ended struct {
	status        Status
	reason        string
	duration      time.Duration
	exitCode      *int
	signal        string
	remoteStopped *bool
	httpStatus    int
}

// Progress receives the bytes an action received so far.
type Progress func(bytes int64, elapsed time.Duration)

// progressInterval is how often Progress is called while bytes arrive.
const progressInterval = 250 * time.Millisecond

// run takes one action through the pipeline: policy and the target's
// readiness, the concurrency limits, the audit intent, execution into
// redacting captures, the status, the audit outcome and the result. An
// action that does not run is audited as refused and returned as a
// failure that says why.
func (g *Gateway) run(ctx context.Context, a *action, progress Progress) *ToolResult {
	intent := &a.intent
	if err := a.check(); err != nil {
		var de *policy.DeniedError
		var ue *unusableError
		switch {
		case errors.As(err, &de):
			g.refuse(intent, StatusDenied, de.Rule, de.Reason)
		case errors.As(err, &ue):
			g.refuse(intent, StatusFailed, ue.rule, ue.reason)
		default:
			g.refuse(intent, StatusFailed, "", err.Error())
		}
		return g.failure("%v", err)
	}
	release, err := g.limit.acquire(ctx, intent.Target)
	if err != nil {
		var busy *BusyError
		if errors.As(err, &busy) {
			return g.failure("%v", err)
		}
		return g.failure("cancelled before it started, while waiting for a free slot: %v", err)
	}
	defer release()

	out := g.spool.Begin(intent.Tool, intent.Target)
	intent.Kind, intent.Handle, intent.Decision = "intent", out.Handle(), "allow"
	if err := g.audit.Append(intent); err != nil {
		out.Finish()
		g.log.Error("audit log: the intent record could not be written; the action did not run", "error", err)
		return g.failure("the action did not run: its intent could not be written to the audit log: %v", err)
	}

	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(g.ctx, func() { cancel(context.Cause(g.ctx)) })
	defer stop()
	g.wg.Add(1)
	defer g.wg.Done()
	g.active.Add(1)
	defer g.active.Add(-1)

	start := time.Now()
	lim := output.Limits{HeadBytes: g.cfg.Server.HeadBytes, TailBytes: g.cfg.Server.TailBytes}
	var received atomic.Int64
	captures := make([]*output.Capture, len(a.streams))
	writers := make([]io.Writer, len(a.streams))
	for i, name := range a.streams {
		captures[i] = out.Capture(name, g.red, lim)
		writers[i] = &counter{w: captures[i], n: &received}
	}
	timeout, capped := policy.Timeout(a.asked, a.timeout, a.maxTimeout)
	stopProgress := reportProgress(progress, &received, start)
	e := a.execute(actx, timeout, writers)
	stopProgress()
	if e.status.cutShort() {
		for _, c := range captures {
			c.Cut()
		}
	}
	out.Finish()

	if e.duration == 0 {
		e.duration = time.Since(start)
	}
	if e.status == StatusCancelled {
		e.reason = g.cancelReason(actx)
	}
	e.reason = g.red.RedactString(e.reason)
	if capped && e.status == StatusTimeout {
		e.reason += fmt.Sprintf(" (timeout_s was capped to the target's max_timeout of %v)", a.maxTimeout)
	}
	streams := make([]output.Stream, len(captures))
	outcome := &audit.Record{
		Kind: "outcome", Handle: out.Handle(), Tool: intent.Tool, Target: intent.Target,
		Status: string(e.status), ExitCode: e.exitCode, Signal: e.signal, HTTPStatus: e.httpStatus,
		DurationMS: e.duration.Milliseconds(), Reason: e.reason, RemoteStopped: e.remoteStopped,
		Streams: map[string]audit.Stream{},
	}
	for i, c := range captures {
		streams[i] = c.Summary()
		outcome.Streams[a.streams[i]] = audit.Stream{Bytes: streams[i].Bytes, SHA256: streams[i].SHA256}
	}
	auditErr := g.audit.Append(outcome)
	if auditErr != nil {
		g.log.Error("audit log: the outcome record could not be written", "handle", out.Handle(), "error", auditErr)
	}
	structured, named, what, isError := a.finish(e, out.Handle(), streams)
	return g.result(structured, isError, auditErr, what, out.Handle(), named...)
}

// unusableError refuses an action for a reason of its target or its
// request, with the config key (rule) behind it.
type unusableError struct {
	rule   string // e.g. "credentials", "max_stdin_bytes"
	reason string // for the audit outcome
	err    error  // for the agent
}

func (e *unusableError) Error() string { return e.err.Error() }

// refuse audits a call that was refused: an intent with the decision and
// the rule, and an outcome that says why it did not run.
func (g *Gateway) refuse(intent *audit.Record, status Status, rule, reason string) {
	intent.Kind, intent.Decision, intent.Rule = "intent", "deny", rule
	err := g.audit.Append(intent)
	if err == nil {
		err = g.audit.Append(&audit.Record{Kind: "outcome", Tool: intent.Tool, Target: intent.Target, Status: string(status), Reason: reason})
	}
	if err != nil {
		g.log.Error("audit log: a refused call could not be recorded", "tool", intent.Tool, "target", intent.Target, "error", err)
	}
}

// result finishes an action's tool result: previews shrink until the
// response fits result_bytes, and a failed outcome record is reported.
func (g *Gateway) result(structured any, isError bool, auditErr error, what, handle string, streams ...output.NamedStream) *ToolResult {
	what = g.red.RedactString(what) // it quotes the command or path
	if auditErr != nil {
		// The action ran, but its outcome is not on record: say so plainly.
		what += " WARNING: the action ran, but its outcome could not be written to the audit log (" + g.red.RedactString(auditErr.Error()) + ")."
		isError = true
	}
	text, err := output.BuildResult(output.ResultSpec{Structured: structured, What: what, Handle: handle, Streams: streams}, g.cfg.Server.ResultBytes)
	if err != nil {
		return g.failure("%s (%v)", what, err)
	}
	return &ToolResult{Structured: structured, Text: text, IsError: isError}
}

// counter counts the bytes written through it into n, for progress.
type counter struct {
	w io.Writer
	n *atomic.Int64
}

func (c *counter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return c.w.Write(p)
}

// reportProgress calls progress with the count in n every
// progressInterval, from a goroutine that the returned stop ends and waits
// for.
func reportProgress(progress Progress, n *atomic.Int64, start time.Time) (stop func()) {
	if progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(progressInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				progress(n.Load(), time.Since(start))
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
