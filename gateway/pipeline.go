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
	"github.com/actiongw/actiongw/internal/redact"
	"github.com/actiongw/actiongw/policy"
	"github.com/actiongw/actiongw/sshexec"
)

// action is one call of an action tool as the pipeline runs it: its kind,
// which does what differs between tools, and what the pipeline keeps of
// the call.
type action struct {
	kind kind
	// intent is the audit intent: tool, target and what is asked (a
	// command, or a method and a path).
	intent audit.Record
	// decision is policy's, as the last check returned it: the pipeline
	// asks a person, and bounds the action's time, as it says.
	decision policy.Decision
	// approved is set once a question is settled, so that a second pass
	// (after a host key was trusted) does not ask again.
	approved bool
	// remember are the actions a person approved for a while, kept once
	// the intent is written.
	remember []remember
	// progress is the call's, which a question waiting in the console
	// tells so (nil: none).
	progress Progress
}

// kind is what the pipeline asks of one kind of action (ssh_exec,
// http_request, ...), each a type in its tool's file. The pipeline does
// the rest: the slots, the audit, the captures, redaction and the result.
// A kind may also be an asker, a reserver or a fanout.
type kind interface {
	// check decides whether the action may run: it returns policy's
	// decision, and a refusal in the order the kind checks (a
	// *policy.DeniedError, a *policy.LimitError, or an *unusableError for
	// a reason of the target or the request, such as a secret that did
	// not load). It may correct the intent to what would actually be
	// sent.
	check(intent *audit.Record) (policy.Decision, error)
	// streams names the streams execute writes, in order.
	streams() []string
	// execute runs the action until ctx ends (its deadline is the
	// action's timeout, its cause a *timeoutError then), writing each
	// stream into the writer at its index, and says how it ended. Bytes it
	// moves that go to no stream (an upload's) it adds to moved, for
	// progress.
	execute(ctx context.Context, w []io.Writer, moved *atomic.Int64) *ended
	// finish is the tool's result for how the action ended, from e and
	// what the pipeline added to it (see ended); it redacts nothing.
	finish(e *ended) *result
}

// sender is a kind whose call carries bytes it sends: an upload's content,
// a command's stdin, a request's body. Once execute has returned, the
// pipeline calls drop, and the kind lets go of them: the registry keeps
// the last keepFinished finished actions, kinds and all, and each would
// otherwise keep what its call sent (an inline upload of 5 MiB its 7 MB
// frame, some 2.5 GB for the last 356). finish must not need them.
type sender interface {
	drop()
}

// asker is a kind whose decision may be to ask a person (policy.Asked):
// question is what the person is asked, once check passed.
type asker interface {
	question() *Question
}

// reserver is a kind that takes what it needs of its target before it can
// start (an SSH session), waiting at most wait for one to free up; ctx
// carries the action's deadline, which connecting counts against. An
// error means the action did not start. release gives back what execute
// did not use.
type reserver interface {
	reserve(ctx context.Context, wait time.Duration) (release func(), err error)
}

// fanout is a kind whose execute runs an action on each of its targets
// (ssh_exec_many). It takes no slot of the server (its actions do), its
// progress counts targets done, and its result is in parts (groups of
// targets), which the pipeline leaves out, the last first, where even
// bare ones would not fit result_bytes (fitParts).
type fanout interface {
	targets() int
	// keep is r, a result of finish, with only its first k parts, and
	// with no previews when bare.
	keep(r *result, k int, bare bool) *result
}

// ended is how an action ended, as execute says (what the audit outcome
// records, less the streams), and what the pipeline adds for finish.
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
	// remoteReason says that the reason may quote what a server sent (a
	// malformed header line): it is clipped to maxReasonBytes, once
	// redacted.
	remoteReason bool

	// For finish, from the pipeline: the action's handle and its streams
	// (in the order of kind.streams), and the texts a result may quote,
	// redacted: the intent's command and path, and the path a transfer
	// resolved.
	handle                  string
	streams                 []output.Stream
	command, path, resolved string
}

// result is a kind's result for one call, which the pipeline completes
// (see Gateway.result): its structured result, the previews in it that
// may shrink, a sentence or two on what ran and how it ended, whether the
// call failed, and, for a fanout, how many parts it has.
type result struct {
	structured any
	streams    []output.NamedStream
	what       string
	isError    bool
	parts      int
}

// Progress receives how far an action is, every progressInterval.
type Progress func(ProgressReport)

// ProgressReport is how far an action is: the bytes it received so far, or
// for a fan-out (Total set) how many of its Total targets are done.
type ProgressReport struct {
	Done    int64
	Total   int64
	Elapsed time.Duration
	// Waiting is set, and Done and Total not, while the action waits for
	// the person's answer in the console.
	Waiting bool
}

// progressInterval is how often Progress is called while bytes arrive.
const progressInterval = 250 * time.Millisecond

// timeoutError is the cause that ends an action at its timeout: the one
// timeout error there is. sshexec and httpact know no type of their own
// (they import nothing of this project, and the standard library has the
// word): a context of theirs that ends at a deadline, or with a cause
// that wraps context.DeadlineExceeded as this does, is a timeout to them;
// they stop the action and give this text as the reason.
type timeoutError struct{ d time.Duration }

func (e *timeoutError) Error() string { return fmt.Sprintf("timed out after %v", e.d) }
func (e *timeoutError) Unwrap() error { return context.DeadlineExceeded }

// run takes one action through the pipeline: policy and the target's
// readiness, a person's approval, the queue for slots (of the target, of
// its SSH sessions, of the server), the audit intent, execution into
// redacting captures, the status, the audit outcome and the result. An
// action that does not start is audited as such and returned as a failure
// that says why.
//
// The action runs on a goroutine of the gateway; the call waits for it up
// to wait (nil: the server's wait) from its start. While the call waits,
// its cancellation stops the action; an action still running when the
// wait ends goes on in the background (see await), and the call returns
// it as running.
func (g *Gateway) run(ctx context.Context, s *state, a *action, progress Progress, wait *float64) *ToolResult {
	called := time.Now()
	a.progress = progress
	waitLimit := waitFor(wait, s.core.server.Wait)
	act, byCall, fail := g.start(ctx, s, a, waitLimit == 0)
	a.progress = nil // start asked its questions; kept, it would keep the call (see launching)
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
	if fail := g.checked(ctx, s, a); fail != nil {
		return nil, nil, fail, nil
	}
	if background && !c.background.free() {
		return nil, nil, g.notStarted(ctx, c, &a.intent, &BusyError{Target: a.intent.Target, Limit: cap(c.background), Scope: "background"}), nil
	}
	l := g.launching(ctx)
	dctx, fail, unknown := g.queue(ctx, s, a, l)
	if fail == nil && unknown == nil {
		fail = g.stale(s, a)
	}
	if fail != nil || unknown != nil {
		l.undo()
		return nil, nil, fail, unknown
	}
	if act, fail = g.begin(s, a, l, dctx); fail != nil {
		return nil, nil, fail, nil
	}
	return act, l.byCall, nil, nil
}

// checked is the action's check, policy's decision kept, and, when that
// is to ask, the person's answer: a refusal is audited and returned as
// fail.
func (g *Gateway) checked(ctx context.Context, s *state, a *action) (fail *ToolResult) {
	d, err := a.kind.check(&a.intent)
	if err == nil && d.Verdict == policy.Denied {
		err = d.Err
	}
	a.decision = d
	if err != nil {
		r := g.failure("%v", err)
		r.status = g.refused(s.core, &a.intent, err)
		return r
	}
	if ask, ok := a.kind.(asker); ok && d.Verdict == policy.Asked && !a.approved {
		if fail := g.decide(ctx, s, a, ask.question(), d.Rule); fail != nil {
			return fail
		}
	}
	a.approved = true
	return nil
}

// launch is an action from its queue to its end: its context, which
// outlives the call's (the call's cancellation reaches it only while the
// call waits: await disarms byCall; Close cancels it and waits for it),
// and what it holds.
type launch struct {
	g      *Gateway
	ctx    context.Context
	cancel context.CancelCauseFunc
	// byCall and byShutdown end the links from the call's and the
	// gateway's cancellation.
	byCall, byShutdown func() bool
	releases           []func()
}

// launching begins the launch of a call's action (it counts in g.wg until
// undone or ended).
func (g *Gateway) launching(ctx context.Context) *launch {
	// Not derived from ctx: the action needs none of the call's values,
	// and through them (its approver holds the request) the registry
	// would keep each finished action's whole call.
	actx, cancel := context.WithCancelCause(context.Background())
	l := &launch{g: g, ctx: actx, cancel: cancel}
	l.byCall = context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	l.byShutdown = context.AfterFunc(g.ctx, func() { cancel(context.Cause(g.ctx)) })
	g.wg.Add(1)
	return l
}

// release gives back what the action held, the last taken first.
func (l *launch) release() {
	for _, r := range slices.Backward(l.releases) {
		r()
	}
	l.byCall()
	l.byShutdown()
	l.cancel(nil)
}

// undo ends a launch whose action did not start.
func (l *launch) undo() {
	l.release()
	l.g.wg.Done()
}

// queue takes, within queue_wait and with nothing started yet, a slot of
// the action's target, what it reserves (an SSH session, connecting
// against the action's timeout), then a slot of the server, so that a
// call waiting for a busy target holds none of the server's. It returns
// the context execute runs under, its deadline the action's timeout; or
// the failure (audited) of an action that did not start; or unknown (see
// startOnce).
func (g *Gateway) queue(ctx context.Context, s *state, a *action, l *launch) (dctx context.Context, fail *ToolResult, unknown *sshexec.HostKeyError) {
	c, intent := s.core, &a.intent
	_, fan := a.kind.(fanout) // a fan-out's targets take their own slots
	qctx, qcancel := context.WithTimeoutCause(l.ctx, c.server.QueueWait, errQueueWait)
	defer qcancel()
	if !fan {
		releaseTarget, err := c.limit.take(qctx, s.slots[intent.Target], "target", intent.Target)
		if err != nil {
			return nil, g.notStarted(l.ctx, c, intent, err), nil
		}
		l.releases = append(l.releases, releaseTarget)
	}
	timeout := a.decision.Timeout
	dctx, dcancel := context.WithTimeoutCause(l.ctx, timeout, &timeoutError{timeout})
	l.releases = append(l.releases, dcancel)
	if r, ok := a.kind.(reserver); ok {
		release, err := r.reserve(dctx, time.Until(deadline(qctx)))
		if err != nil {
			var hk *sshexec.HostKeyError
			if errors.As(err, &hk) && hk.Unknown() && asksHostKey(s.cfg, hk.Target) && ctx.Err() == nil {
				return nil, nil, hk
			}
			return nil, g.notStarted(dctx, c, intent, err), nil
		}
		l.releases = append(l.releases, release)
	}
	if !fan {
		releaseServer, err := c.limit.take(qctx, c.limit.server, "server", intent.Target)
		if err != nil {
			return nil, g.notStarted(l.ctx, c, intent, err), nil
		}
		l.releases = append(l.releases, releaseServer)
	}
	// A call cancelled while it queued does not start, even when a slot
	// came free at the same moment (take prefers a free slot to a wait
	// that ended).
	if ctx.Err() != nil {
		return nil, g.notStarted(ctx, c, intent, context.Cause(ctx)), nil
	}
	return dctx, nil, nil
}

// stale refuses, audited, a call that waited for a slot and meets a
// reloaded configuration that differs (not the same file saved again): it
// was decided under rules no longer in effect, which may deny it now, or
// send it elsewhere. The agent calls again, under the new ones. One a
// person was asked about runs as the person saw it and answered; not one
// a remembered answer let through (the reload ends those: their keys name
// the state) or whose person was shown only a host key.
func (g *Gateway) stale(s *state, a *action) (fail *ToolResult) {
	if cur := g.state().cfg; cur == s.cfg || reflect.DeepEqual(cur, s.cfg) || slices.ContainsFunc(a.intent.Approvals, shownAction) {
		return nil
	}
	err := policy.Reloaded(a.intent.Target)
	r := g.failure("%v", err)
	r.status = g.refused(s.core, &a.intent, err)
	return r
}

// begin writes the action's intent, which gives it its handle, and starts
// it on a goroutine of the gateway (carryOut) under dctx, with a capture
// for each of its streams; if the intent cannot be written, nothing runs.
func (g *Gateway) begin(s *state, a *action, l *launch, dctx context.Context) (*liveAction, *ToolResult) {
	c, intent := s.core, &a.intent
	out := c.spool.Begin(intent.Tool, intent.Target)
	intent.Kind, intent.Handle, intent.Decision = "intent", out.Handle(), "allow"
	if err := g.appendAudit(c, intent); err != nil {
		out.Finish()
		l.undo()
		g.log.Error("audit log: the intent record could not be written; the action did not run", "error", err)
		return nil, g.failure("the action did not run: its intent could not be written to the audit log: %v", err)
	}
	for _, r := range a.remember {
		g.approved.add(r.key, time.Now().Add(r.d))
	}
	red := g.red.Load()
	lim := output.Limits{HeadBytes: c.server.HeadBytes, TailBytes: c.server.TailBytes}
	var streams []*output.Capture
	for _, name := range a.kind.streams() {
		sc := out.Capture(name, red, lim)
		g.tap(out.Handle(), name, sc)
		streams = append(streams, sc)
	}
	live := g.actions.begin(out.Handle(), intent, a, c, l.cancel, streams)
	g.changed(live)
	go g.carryOut(dctx, s, a, l, live, out, red)
	return live, nil
}

// carryOut runs the action that began, on its goroutine: it executes it
// into its streams, each also passing the redactors put in effect while
// it runs (secrets learned or loaded since red was taken), ends the
// streams, audits the outcome and sets the result; the action's slots are
// free before anyone learns it ended.
func (g *Gateway) carryOut(ctx context.Context, s *state, a *action, l *launch, live *liveAction, out *output.Action, red *redact.Redactor) {
	defer g.wg.Done()
	g.active.Add(1)
	ws := live.writers()
	follows := make([]*followRedactor, len(ws))
	for i, w := range ws {
		follows[i] = g.follow(w, red)
		ws[i] = follows[i]
	}
	e := a.kind.execute(ctx, ws, &live.received)
	if k, ok := a.kind.(sender); ok {
		k.drop()
	}
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
		// Who cancelled it, and why its stop was not verified if it was
		// not.
		unverified := ""
		if i := strings.Index(e.reason, "not verified stopped: "); i >= 0 {
			unverified = e.reason[i:]
		}
		e.reason = joinReason(g.cancelReason(ctx), unverified)
	}
	redacted := func(s string) string { return red.RedactString(g.redactString(s)) }
	g.told(e, live, redacted, live.summaries())
	auditErr := g.outcome(s, a, e, follows, live.matched())
	r := g.finished(s.core, a, e, auditErr)
	l.release()
	g.active.Add(-1)
	live.end(e, r, &g.actions)
	g.changed(live)
}

// told readies e for finish: its texts redacted (reason, headers, the
// path a transfer resolved), a reason that quotes a server clipped once
// redacted, and the handle, the streams and the intent's texts the result
// may quote.
func (g *Gateway) told(e *ended, act *liveAction, redacted func(string) string, streams []output.Stream) {
	e.reason = redacted(e.reason)
	if e.remoteReason {
		e.reason = output.Clip(e.reason, maxReasonBytes)
	}
	if e.headers != nil {
		// Names too: a server may echo anything into a header name.
		headers := make(map[string]string, len(e.headers))
		for k, v := range e.headers {
			headers[redacted(k)] = redacted(v)
		}
		e.headers = headers
	}
	if e.transfer != nil {
		e.resolved = redacted(e.transfer.Path) // the host's text
	}
	e.handle, e.streams = act.handle, streams
	e.command, e.path = redacted(act.intent.Command), redacted(act.intent.Path)
}

// outcome writes the audit outcome of the action that ended as e, and
// returns the error that kept it from the log.
func (g *Gateway) outcome(s *state, a *action, e *ended, follows []*followRedactor, matched []string) error {
	intent := &a.intent
	outcome := &audit.Record{
		Kind: "outcome", Handle: intent.Handle, Parent: intent.Parent, Tool: intent.Tool, Target: intent.Target,
		Status: string(e.status), ExitCode: e.exitCode, Signal: e.signal, HTTPStatus: e.httpStatus,
		DurationMS: e.duration.Milliseconds(), Reason: e.reason, RemoteStopped: e.remoteStopped,
		Streams: map[string]audit.Stream{}, Rule: e.rule,
	}
	if t := e.transfer; t != nil {
		outcome.Path, outcome.Size, outcome.SHA256 = t.Path, t.Bytes, t.SHA256
	}
	for i, name := range a.kind.streams() {
		outcome.Streams[name] = audit.Stream{Bytes: e.streams[i].Bytes, SHA256: e.streams[i].SHA256}
	}
	if outcome.SecretsSeen = notSent(s.cfg, intent, matched, follows); len(outcome.SecretsSeen) > 0 {
		g.log.Warn("secrets the target was never sent came back whole in its output: guessed, or found on the target",
			"handle", intent.Handle, "tool", intent.Tool, "target", intent.Target, "secrets", outcome.SecretsSeen)
	}
	err := g.appendAudit(s.core, outcome)
	if err != nil {
		g.log.Error("audit log: the outcome record could not be written", "handle", intent.Handle, "error", err)
	}
	return err
}

// finished is the final result of the action that ended as e.
func (g *Gateway) finished(c *core, a *action, e *ended, auditErr error) *ToolResult {
	note := ""
	if d := &a.decision; d.Capped {
		note = fmt.Sprintf(" Note: timeout_s=%g is over the max_timeout of %s, so the action was given %v.", d.AskedTimeout.Seconds(), a.intent.Target, d.Timeout)
	}
	return g.result(c, a.kind, a.kind.finish(e), e.handle, note, auditErr)
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
