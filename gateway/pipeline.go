package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/policy"
	"github.com/actiongw/actiongw/sshexec"
)

// action is one call of an action tool as the pipeline runs it. The
// pipeline is what every kind of action shares; the fields are what differs.
type action struct {
	// intent is the audit intent: tool, target and what is asked (a
	// command, or a method and a path).
	intent audit.Record
	// check decides whether the action may run: it returns policy's
	// decision, and the refusal, in the order the action checks: a
	// *policy.DeniedError or *policy.LimitError, or an *unusableError for
	// a reason of the target or the request (a secret that did not load).
	// It may correct the intent to what would actually be sent.
	check func(intent *audit.Record) (policy.Decision, error)
	// decision is the last check's: the pipeline asks, and bounds the
	// action's time, as it says.
	decision policy.Decision
	// approval is the question a person must approve before the action
	// runs, when its decision is to ask. approved is set once that is
	// settled, so that a second pass (after a host key was trusted) does
	// not ask again.
	approval func() *Question
	approved bool
	// remember are the actions a person approved for a while, kept once
	// the intent is written.
	remember []remember
	// reserve, when set, takes what the action needs of its target before
	// it can start (an SSH session), waiting at most wait for one to free
	// up; ctx carries the action's deadline, which connecting counts
	// against. An error means the action did not start. release gives back
	// what execute did not use.
	reserve func(ctx context.Context, wait time.Duration) (release func(), err error)
	// streams names the streams execute writes, in order.
	streams []string
	// execute runs the action until ctx ends (its deadline is the
	// action's timeout, its cause a *timeoutError then), writing each
	// stream into the writer at its index, and says how it ended. Bytes it
	// moves that go to no stream (an upload's) it adds to moved, for
	// progress.
	execute func(ctx context.Context, w []io.Writer, moved *atomic.Int64) *ended
	// targets is the number of targets of a fan-out, whose execute runs an
	// action on each (see SSHExecMany); 0 for an action that does its work
	// itself. A fan-out takes no slot of the server (its actions do), and
	// its progress counts targets done.
	targets int64
	// finish builds the tool's structured result from how the action
	// ended and its streams, with the streams it holds for shrinking, a
	// sentence on what ran, and whether the call failed.
	finish func(e *ended, handle string, streams []output.Stream) (structured any, named []output.NamedStream, what string, isError bool)
}

// notSent returns the secrets of matched, and of what the follows
// matched, that the action's target was never sent: its own credentials
// (an SSH target's, not its jump host's; an HTTP endpoint's, and the
// access tokens fetched for it) are not news in its output, any other
// secret is. Sorted, each once.
func notSent(cfg *config.Config, intent *audit.Record, matched []string, follows []*followRedactor) []string {
	for _, f := range follows {
		matched = append(matched, f.matched()...)
	}
	var sent []string
	if intent.Tool == "http_request" {
		if e := cfg.HTTP[intent.Target]; e != nil {
			sent = append(e.SecretNames(), intent.Target+accessTokenSuffix)
		}
	} else if t := cfg.SSH[intent.Target]; t != nil {
		sent = t.SecretNames()
	}
	matched = slices.DeleteFunc(matched, func(name string) bool { return slices.Contains(sent, name) })
	slices.Sort(matched)
	return slices.Compact(matched)
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
	// attempts and headers are an HTTP request's.
	attempts int
	headers  map[string]string
	// rule is the rule that denied an action while it ran (a path that
	// resolved outside allow_paths), and transfer a file transfer's.
	rule     string
	transfer *sshexec.TransferResult
}

// Progress receives how far an action is, every progressInterval.
type Progress func(ProgressReport)

// ProgressReport is how far an action is: the bytes it received so far, or
// for a fan-out (Total set) how many of its Total targets are done.
type ProgressReport struct {
	Done    int64
	Total   int64
	Elapsed time.Duration
}

// progressInterval is how often Progress is called while bytes arrive.
const progressInterval = 250 * time.Millisecond

// timeoutError is the cause that ends an action at its timeout. It is a
// context.DeadlineExceeded for sshexec and httpact, which say "timeout"
// for it and stop the action.
type timeoutError struct{ d time.Duration }

func (e *timeoutError) Error() string { return fmt.Sprintf("timed out after %v", e.d) }
func (e *timeoutError) Unwrap() error { return context.DeadlineExceeded }

// run takes one action through the pipeline: policy and the target's
// readiness, the queue for slots (of the target, of its SSH sessions, of
// the server), the audit intent, execution into redacting captures, the
// status, the audit outcome and the result. An action that does not start
// is audited as such and returned as a failure that says why.
//
// The action runs on a goroutine of the gateway; the call waits for it up
// to wait (nil: the server's wait) from its start. While the call waits,
// its cancellation stops the action; an action still running when the
// wait ends goes on in the background (see await), and the call returns
// it as running.
func (g *Gateway) run(ctx context.Context, s *state, a *action, progress Progress, wait *float64) *ToolResult {
	called := time.Now()
	waitLimit := waitFor(wait, s.core.server.Wait)
	act, byCall, fail := g.start(ctx, s, a, waitLimit == 0)
	if fail != nil {
		return fail
	}
	return g.await(ctx, act, called.Add(waitLimit), progress, byCall)
}

// start takes an action through the pipeline up to its execution, which
// it starts on a goroutine of the gateway: it returns the running action,
// and byCall, which ends the link from ctx's cancellation to the action
// (see await). An action that did not start is returned as fail. With
// background, the action is to go on in the background at once, so a free
// background slot is needed.
func (g *Gateway) start(ctx context.Context, s *state, a *action, background bool) (act *liveAction, byCall func() bool, fail *ToolResult) {
	act, byCall, fail, unknown := g.startOnce(ctx, s, a, background)
	// The host (or a jump host) presented a key known_hosts lacks, and its
	// target asks the person about such a key: trusted, the action starts
	// again from the queue, where the key trusted is verified like any
	// recorded key. Each host is asked once: the same key unknown again
	// is refused.
	trusted := map[string]bool{}
	for unknown != nil {
		q := hostKeyQuestion(s.cfg, unknown)
		// A fan-out's target cannot send its question back with the
		// call's result: the call would come again and run the fan-out's
		// other targets twice.
		q.NowOnly = a.intent.Parent != ""
		if trusted[q.Key] || len(a.intent.Approvals) >= audit.MaxApprovals {
			return nil, nil, g.notStarted(ctx, s.core, &a.intent, unknown)
		}
		if fail := g.decide(ctx, s, a, q, ruleHostKeyAsk); fail != nil {
			return nil, nil, fail
		}
		if err := sshexec.TrustHostKey(unknown); err != nil {
			r := g.failure("%v", err)
			r.status = g.refused(s.core, &a.intent, &unusableError{ruleHostKeyAsk, err.Error(), err})
			return nil, nil, r
		}
		trusted[q.Key] = true
		act, byCall, fail, unknown = g.startOnce(ctx, s, a, background)
	}
	return act, byCall, fail
}

// decide asks a person q (see approve) for the action a. A refusal is
// audited and returned as fail; so is a call that ended while it was
// asked (its question withdrawn, status cancelled). A question that goes
// back with the result is fail too, unaudited: nothing happened.
func (g *Gateway) decide(ctx context.Context, s *state, a *action, q *Question, rule string) (fail *ToolResult) {
	err := g.approve(ctx, s, a, q, rule)
	var withdrawn *withdrawnError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrAskLater):
		return g.failure("a person's answer is needed first")
	case errors.As(err, &withdrawn):
		reason := "cancelled while the person at the client was asked: " + g.cancelReason(ctx)
		g.refuse(s.core, &a.intent, StatusCancelled, rule, reason)
		r := g.failure("the action did not start: %s", reason)
		r.status = StatusCancelled
		return r
	}
	r := g.failure("%v", err)
	r.status = g.refused(s.core, &a.intent, err)
	return r
}

// startOnce is one pass of start. unknown is set, and nothing else, when
// the action could not start because its target (or a jump host of it)
// presented an unknown host key that a person may be asked to trust.
func (g *Gateway) startOnce(ctx context.Context, s *state, a *action, background bool) (act *liveAction, byCall func() bool, fail *ToolResult, unknown *sshexec.HostKeyError) {
	c := s.core
	if c.auditBroken != nil {
		return nil, nil, g.failure("no action can run while the audit log cannot be written: %v", c.auditBroken), nil
	}
	intent := &a.intent
	d, err := a.check(intent)
	if err == nil && d.Verdict == policy.Denied {
		err = d.Err
	}
	a.decision = d
	if err != nil {
		r := g.failure("%v", err)
		r.status = g.refused(c, intent, err)
		return nil, nil, r, nil
	}
	if d.Verdict == policy.Asked && !a.approved {
		if fail := g.decide(ctx, s, a, a.approval(), d.Rule); fail != nil {
			return nil, nil, fail, nil
		}
	}
	a.approved = true
	timeout, capped := d.Timeout, d.Capped
	if background && !c.background.free() {
		return nil, nil, g.notStarted(ctx, c, intent, &BusyError{Target: intent.Target, Limit: cap(c.background), Scope: "background"}), nil
	}

	// The action's context outlives the call's: the call's cancellation
	// reaches it only while the call waits (await disarms it). Close
	// cancels it and waits for it.
	actx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	// Not the named result: a return before the action starts sets that
	// to nil before the deferred undo runs.
	stopByCall := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	byShutdown := context.AfterFunc(g.ctx, func() { cancel(context.Cause(g.ctx)) })
	g.wg.Add(1)
	var releases []func()
	// release gives back what the action held; undo ends a call whose
	// action did not start.
	release := func() {
		for _, r := range slices.Backward(releases) {
			r()
		}
		stopByCall()
		byShutdown()
		cancel(nil)
	}
	undo := func() {
		release()
		g.wg.Done()
	}

	// The queue: nothing has started, and no slot of the server is held
	// while the call waits for its target.
	qctx, qcancel := context.WithTimeoutCause(actx, c.server.QueueWait, errQueueWait)
	defer qcancel()
	if a.targets == 0 { // a fan-out's targets take their own
		releaseTarget, err := c.limit.take(qctx, s.slots[intent.Target], "target", intent.Target)
		if err != nil {
			defer undo()
			return nil, nil, g.notStarted(actx, c, intent, err), nil
		}
		releases = append(releases, releaseTarget)
	}
	dctx, dcancel := context.WithTimeoutCause(actx, timeout, &timeoutError{timeout})
	releases = append(releases, dcancel)
	if a.reserve != nil {
		release, err := a.reserve(dctx, time.Until(deadline(qctx)))
		if err != nil {
			defer undo()
			var hk *sshexec.HostKeyError
			if errors.As(err, &hk) && hk.Unknown() && asksHostKey(s.cfg, hk.Target) && ctx.Err() == nil {
				return nil, nil, nil, hk
			}
			return nil, nil, g.notStarted(dctx, c, intent, err), nil
		}
		releases = append(releases, release)
	}
	if a.targets == 0 {
		releaseServer, err := c.limit.take(qctx, c.limit.server, "server", intent.Target)
		if err != nil {
			defer undo()
			return nil, nil, g.notStarted(actx, c, intent, err), nil
		}
		releases = append(releases, releaseServer)
	}

	// A call cancelled while it queued does not start, even when a slot
	// came free at the same moment (take prefers a free slot to a wait
	// that ended).
	if ctx.Err() != nil {
		defer undo()
		return nil, nil, g.notStarted(ctx, c, intent, context.Cause(ctx)), nil
	}
	// A call that waited for a slot and meets a reloaded configuration
	// that differs (not the same file saved again) is refused: it was decided under rules no longer in effect, which may
	// deny it now, or send it elsewhere. The agent calls again, under the
	// new ones. One a person was asked about runs as the person saw it
	// and answered; not one a remembered answer let through (the reload
	// ends those: their keys name the state) or whose person was shown
	// only a host key.
	if cur := g.state().cfg; cur != s.cfg && !reflect.DeepEqual(cur, s.cfg) && !slices.ContainsFunc(intent.Approvals, shownAction) {
		defer undo()
		err := policy.Reloaded(intent.Target)
		r := g.failure("%v", err)
		r.status = g.refused(c, intent, err)
		return nil, nil, r, nil
	}
	out := c.spool.Begin(intent.Tool, intent.Target)
	intent.Kind, intent.Handle, intent.Decision = "intent", out.Handle(), "allow"
	if err := g.appendAudit(c, intent); err != nil {
		out.Finish()
		undo()
		g.log.Error("audit log: the intent record could not be written; the action did not run", "error", err)
		return nil, nil, g.failure("the action did not run: its intent could not be written to the audit log: %v", err), nil
	}
	for _, r := range a.remember {
		g.approved.add(r.key, time.Now().Add(r.d))
	}

	live := g.actions.begin(out.Handle(), intent, a, c, cancel)
	act = live
	red := g.red.Load()
	lim := output.Limits{HeadBytes: c.server.HeadBytes, TailBytes: c.server.TailBytes}
	for _, name := range a.streams {
		act.addStream(out.Capture(name, red, lim))
	}
	go func() {
		defer g.wg.Done()
		g.active.Add(1)
		// Each stream also passes the redactors put in effect while the
		// action runs: secrets learned or loaded since red was taken.
		ws := live.writers()
		follows := make([]*followRedactor, len(ws))
		for i, w := range ws {
			follows[i] = g.follow(w, red)
			ws[i] = follows[i]
		}
		e := a.execute(dctx, ws, &live.received)
		for _, f := range follows {
			f.end(e.status.cutShort())
		}
		// Ended under the streams' locks: a snapshot may be reading them.
		live.endStreams(e.status.cutShort())
		out.Finish()
		if e.duration == 0 {
			e.duration = time.Since(live.started)
		}
		if e.status == StatusCancelled {
			// Who cancelled it, and why its stop was not verified if it
			// was not.
			unverified := ""
			if i := strings.Index(e.reason, "not verified stopped: "); i >= 0 {
				unverified = e.reason[i:]
			}
			e.reason = joinReason(g.cancelReason(dctx), unverified)
		}
		e.reason = red.RedactString(e.reason)
		streams := live.summaries()
		outcome := &audit.Record{
			Kind: "outcome", Handle: out.Handle(), Parent: intent.Parent, Tool: intent.Tool, Target: intent.Target,
			Status: string(e.status), ExitCode: e.exitCode, Signal: e.signal, HTTPStatus: e.httpStatus,
			DurationMS: e.duration.Milliseconds(), Reason: e.reason, RemoteStopped: e.remoteStopped,
			Streams: map[string]audit.Stream{}, Rule: e.rule,
		}
		if t := e.transfer; t != nil {
			outcome.Path, outcome.Size, outcome.SHA256 = t.Path, t.Bytes, t.SHA256
		}
		for i, st := range streams {
			outcome.Streams[a.streams[i]] = audit.Stream{Bytes: st.Bytes, SHA256: st.SHA256}
		}
		if outcome.SecretsSeen = notSent(s.cfg, intent, live.matched(), follows); len(outcome.SecretsSeen) > 0 {
			g.log.Warn("secrets the target was never sent came back whole in its output: guessed, or found on the target",
				"handle", out.Handle(), "tool", intent.Tool, "target", intent.Target, "secrets", outcome.SecretsSeen)
		}
		auditErr := g.appendAudit(c, outcome)
		if auditErr != nil {
			g.log.Error("audit log: the outcome record could not be written", "handle", out.Handle(), "error", auditErr)
		}
		structured, named, what, isError := a.finish(e, out.Handle(), streams)
		if capped {
			what += fmt.Sprintf(" Note: timeout_s=%g is over the max_timeout of %s, so the action was given %v.", d.AskedTimeout.Seconds(), intent.Target, timeout)
		}
		r := g.result(c, structured, isError, auditErr, what, out.Handle(), named...)
		// Its slots are free before anyone learns it ended.
		release()
		g.active.Add(-1)
		live.end(e.status, r, &g.actions)
	}()
	return act, stopByCall, nil, nil
}

// refused audits an action that check refused, a denial by policy or a
// refusal for a reason of its target or request, and returns its status.
func (g *Gateway) refused(c *core, intent *audit.Record, err error) Status {
	var de *policy.DeniedError
	var le *policy.LimitError
	var ue *unusableError
	switch {
	case errors.As(err, &de):
		g.refuse(c, intent, StatusDenied, de.Rule, de.Reason)
		return StatusDenied
	case errors.As(err, &le):
		g.refuse(c, intent, StatusFailed, le.Rule, le.Reason)
	case errors.As(err, &ue):
		g.refuse(c, intent, StatusFailed, ue.rule, ue.reason)
	default:
		g.refuse(c, intent, StatusFailed, "", err.Error())
	}
	return StatusFailed
}

// notStarted audits and answers a call that queued and did not start:
// busy when no slot or session freed up in time, timeout when connecting
// took its whole timeout, cancelled when ctx ended, failed when it could
// not connect.
func (g *Gateway) notStarted(ctx context.Context, c *core, intent *audit.Record, err error) *ToolResult {
	var busy *BusyError
	var queued *sshexec.QueueError
	var te *timeoutError
	status, text := StatusFailed, err.Error()
	switch {
	case errors.As(err, &busy):
		status = StatusBusy
	case errors.As(err, &queued):
		status, text = StatusBusy, "busy: "+err.Error()+"; try again shortly"
	case errors.As(err, &te):
		status, text = StatusTimeout, "timed out while connecting: "+err.Error()
	case ctx.Err() != nil:
		status, text = StatusCancelled, "cancelled before it started: "+g.cancelReason(ctx)
	}
	intent.Handle = output.NewHandle() // names the call in both records; no output is kept
	g.record(c, intent, "allow", status, "", "did not start: "+text)
	r := g.failure("the action did not start: %s", text)
	r.status = status
	return r
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
func (g *Gateway) refuse(c *core, intent *audit.Record, status Status, rule, reason string) {
	if intent.Handle == "" {
		intent.Handle = output.NewHandle() // names the call in both records; no output is kept
	}
	g.record(c, intent, "deny", status, rule, reason)
}

// record audits a call that did not run: its intent with the decision,
// and an outcome that says why.
func (g *Gateway) record(c *core, intent *audit.Record, decision string, status Status, rule, reason string) {
	intent.Kind, intent.Decision, intent.Rule = "intent", decision, rule
	err := g.appendAudit(c, intent)
	if err == nil {
		err = g.appendAudit(c, &audit.Record{Kind: "outcome", Handle: intent.Handle, Parent: intent.Parent, Tool: intent.Tool, Target: intent.Target,
			Status: string(status), Rule: rule, Reason: reason})
	}
	if err != nil {
		g.log.Error("audit log: a refused call could not be recorded", "tool", intent.Tool, "target", intent.Target, "error", err)
	}
}

// result finishes an action's tool result: previews shrink until the
// response fits result_bytes, and a failed outcome record is reported.
func (g *Gateway) result(c *core, structured any, isError bool, auditErr error, what, handle string, streams ...output.NamedStream) *ToolResult {
	what = g.redactString(what) // it quotes the command or path
	if auditErr != nil {
		// The action ran, but its outcome is not on record: say so plainly.
		what += " WARNING: the action ran, but its outcome could not be written to the audit log (" + g.redactString(auditErr.Error()) + ")."
		isError = true
	}
	text, err := output.BuildResult(output.ResultSpec{Structured: structured, What: what, Handle: handle, Streams: streams}, c.server.ResultBytes)
	if err != nil {
		return g.failure("%s (%v)", what, err)
	}
	return &ToolResult{Structured: structured, Text: text, IsError: isError}
}

// appendAudit appends rec to the audit log. When the disk is full, it frees
// space by evicting the oldest finished actions from the spool and tries
// once more: the trail matters more than old output.
func (g *Gateway) appendAudit(c *core, rec *audit.Record) error {
	if c.auditBroken != nil {
		return c.auditBroken
	}
	err := c.audit.Append(rec)
	if errors.Is(err, audit.ErrDiskFull) {
		if freed := c.spool.Reclaim(auditReclaimBytes); freed > 0 {
			g.log.Warn("the state disk is full: evicted finished actions from the spool to write the audit log", "freed_bytes", freed)
			err = c.audit.Append(rec)
		}
	}
	return err
}

// auditReclaimBytes is what the spool frees when the audit log cannot be
// written for a full disk: room for many records.
const auditReclaimBytes = 1 << 20

// deadline is ctx's deadline, which the queue's contexts always have.
func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// reportProgress calls progress with the count in n, of total, every
// progressInterval, from a goroutine that the returned stop ends and waits
// for.
func reportProgress(progress Progress, n *atomic.Int64, total int64, start time.Time) (stop func()) {
	if progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		last := int64(-1) // the first report goes, 0 too
		tick := time.NewTicker(progressInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				// The spec wants every notification's progress higher
				// than the last.
				if now := n.Load(); now > last {
					last = now
					progress(ProgressReport{Done: now, Total: total, Elapsed: time.Since(start)})
				}
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
