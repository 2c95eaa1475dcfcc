package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/output"
)

// keepFinished is how many finished actions action_status, cancel_action
// and list_actions still know; their output stays readable by handle in
// the spool for longer. It holds the targets of the largest fan-out and
// 100 more, so that every handle a fan-out gives answers.
const keepFinished = maxFanout + 100

// maxWait bounds the wait_s of any call: a wait is a held tool call.
const maxWait = 10 * time.Minute

// errCancelAction is the cause that ends an action stopped by cancel_action.
var errCancelAction = errors.New("cancelled by cancel_action")

// registry is the actions of this gateway by handle: the running ones, and
// the last keepFinished finished ones.
type registry struct {
	mu       sync.Mutex
	byHandle map[string]*liveAction
	finished []*liveAction // oldest first
}

// liveAction is one action that started: running on its goroutine, or
// finished with its result.
type liveAction struct {
	handle  string
	intent  audit.Record // tool, target, and the command or method and path
	started time.Time
	a       *action
	core    *core
	cancel  context.CancelCauseFunc

	received atomic.Int64 // bytes of every stream, for progress
	streams  []*liveStream
	changed  notifier      // bytes arrived or the action ended
	done     chan struct{} // closed when the fields below are set
	left     chan struct{} // closed when it goes on in the background
	stays    chan struct{} // closed when its call waits for its end instead

	mu         sync.Mutex // guards background and what follows until done
	background bool       // it holds a slot of core.background
	status     Status
	ended      time.Time
	result     *ToolResult
	// remoteStopped and reason are those of the end, for the console.
	remoteStopped *bool
	reason        string
}

// begin registers the action that starts now under handle, its streams
// captured by streams (in the order of its kind's streams).
func (r *registry) begin(handle string, intent *audit.Record, a *action, c *core, cancel context.CancelCauseFunc, streams []*output.Capture) *liveAction {
	act := &liveAction{handle: handle, intent: *intent, started: time.Now(), a: a, core: c, cancel: cancel,
		status: StatusRunning, done: make(chan struct{}), left: make(chan struct{}), stays: make(chan struct{})}
	for _, sc := range streams {
		act.streams = append(act.streams, &liveStream{c: sc, act: act})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byHandle == nil {
		r.byHandle = map[string]*liveAction{}
	}
	r.byHandle[handle] = act
	return act
}

// get returns the action with handle, or nil.
func (r *registry) get(handle string) *liveAction {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byHandle[handle]
}

// retire keeps act among the finished, forgetting the oldest past
// keepFinished.
func (r *registry) retire(act *liveAction) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finished = append(r.finished, act)
	if n := len(r.finished) - keepFinished; n > 0 {
		for _, old := range r.finished[:n] {
			delete(r.byHandle, old.handle)
		}
		r.finished = slices.Delete(r.finished, 0, n)
	}
}

// list returns the running actions and the finished ones still known,
// newest first.
func (r *registry) list() []*liveAction {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*liveAction, 0, len(r.byHandle))
	for _, act := range r.byHandle {
		out = append(out, act)
	}
	slices.SortFunc(out, func(a, b *liveAction) int { return b.started.Compare(a.started) })
	return out
}

// liveStream is one stream of an action: its capture, written by the
// action's goroutine and read by snapshots of the running action.
type liveStream struct {
	mu  sync.Mutex
	c   *output.Capture
	act *liveAction
}

func (s *liveStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.c.Write(p)
	s.mu.Unlock()
	s.act.received.Add(int64(len(p)))
	s.act.changed.notify()
	return len(p), nil
}

// writers are what execute writes the streams into.
func (act *liveAction) writers() []io.Writer {
	w := make([]io.Writer, len(act.streams))
	for i, s := range act.streams {
		w[i] = s
	}
	return w
}

// endStreams ends every stream: cut, for an action that stopped early
// (held-back bytes that could begin a secret are replaced), else flushed.
func (act *liveAction) endStreams(cut bool) {
	for _, s := range act.streams {
		s.mu.Lock()
		if cut {
			s.c.Cut()
		} else {
			s.c.Flush()
		}
		s.mu.Unlock()
	}
}

// matched returns the names of the secrets the streams' redactors replaced
// whole, sorted, each once.
func (act *liveAction) matched() []string {
	var names []string
	for _, s := range act.streams {
		s.mu.Lock()
		names = append(names, s.c.Matched()...)
		s.mu.Unlock()
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// summaries returns the STREAM objects of the ended streams.
func (act *liveAction) summaries() []output.Stream { return act.each((*output.Capture).Summary) }

// snapshots returns the STREAM objects of a running action: what arrived
// so far.
func (act *liveAction) snapshots() []output.Stream { return act.each((*output.Capture).Snapshot) }

// each returns f of every stream's capture, under the stream's lock.
func (act *liveAction) each(f func(*output.Capture) output.Stream) []output.Stream {
	out := make([]output.Stream, len(act.streams))
	for i, s := range act.streams {
		s.mu.Lock()
		out[i] = f(s.c)
		s.mu.Unlock()
	}
	return out
}

// end records how the action ended and its result, and wakes every waiter.
func (act *liveAction) end(e *ended, r *ToolResult, reg *registry) {
	act.mu.Lock()
	act.status, act.ended, act.result = e.status, time.Now(), r
	act.remoteStopped, act.reason = e.remoteStopped, e.reason
	if act.background {
		act.core.background.release()
	}
	act.mu.Unlock()
	close(act.done)
	act.changed.notify()
	reg.retire(act)
}

// inBackground reports whether the action went on after its call returned.
func (act *liveAction) inBackground() bool {
	act.mu.Lock()
	defer act.mu.Unlock()
	return act.background
}

// leave puts the running action in the background, under a slot taken by
// the caller; it reports false (and gives the slot back) when the action
// finished meanwhile.
func (act *liveAction) leave() bool {
	act.mu.Lock()
	defer act.mu.Unlock()
	if act.result != nil {
		act.core.background.release()
		return false
	}
	act.background = true
	close(act.left)
	return true
}

// finishedResult returns the final result once done is closed.
func (act *liveAction) finishedResult() *ToolResult {
	act.mu.Lock()
	defer act.mu.Unlock()
	return act.result
}

// notifier wakes the goroutines waiting for a change. A waiter takes the
// channel before it looks, so a change between its look and its wait is
// not missed; notify costs an atomic load while nobody waits.
type notifier struct {
	waiting atomic.Bool
	mu      sync.Mutex
	ch      chan struct{}
}

// wait returns a channel that is closed at the next notify.
func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	n.waiting.Store(true)
	return n.ch
}

func (n *notifier) notify() {
	if !n.waiting.Load() {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.waiting.Store(false)
}

// slots is a counting semaphore; a nil one has no slot.
type slots chan struct{}

func (s slots) take() bool {
	select {
	case s <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s slots) free() bool { return len(s) < cap(s) }
func (s slots) release()   { <-s }

// await waits for act until deadline, sending progress, and returns its
// final result. When the deadline passes first: for the call that started
// the action (byCall, which links the call's cancellation to the action),
// the action goes on in the background, if a background slot is free, and
// is returned as running; without a free slot the call waits for the end.
// For action_status (byCall nil), the running action is returned as it is
// now, as it is when ctx ends, whose cancellation never stops the action.
func (g *Gateway) await(ctx context.Context, act *liveAction, deadline time.Time, progress Progress, byCall func() bool) *ToolResult {
	var total int64 // a fan-out's progress counts its targets
	if f, ok := act.a.kind.(fanout); ok {
		total = int64(f.targets())
	}
	stop := reportProgress(progress, &act.received, total, act.started)
	defer stop()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var callDone <-chan struct{}
	if byCall == nil {
		callDone = ctx.Done()
	}
	select {
	case <-act.done:
		return act.finishedResult()
	case <-callDone:
		return g.runningResult(act)
	case <-timer.C:
	}
	if byCall == nil {
		return g.runningResult(act)
	}
	if ctx.Err() == nil && act.core.background.take() {
		// Disarmed, a later cancellation of the call no longer reaches
		// the action; if it fired first, the action is stopping.
		if !byCall() {
			act.core.background.release()
		} else if act.leave() {
			g.changed(act)
			return g.runningResult(act)
		}
	} else if ctx.Err() == nil {
		g.log.Info("no background slot is free (max_background_actions): the call waits for its action to end", "handle", act.handle)
	}
	close(act.stays) // the one await of the call that started it
	<-act.done
	return act.finishedResult()
}

// runningResult is the result of a running action: its tool's result with
// status running and the streams so far, and how to go on.
func (g *Gateway) runningResult(act *liveAction) *ToolResult {
	select {
	case <-act.done: // it ended meanwhile
		return act.finishedResult()
	default:
	}
	e := &ended{status: StatusRunning, duration: time.Since(act.started)}
	streams := act.snapshots()
	g.told(e, act, g.redactString, streams)
	r := act.a.kind.finish(e)
	r.isError = false
	note := fmt.Sprintf(" It goes on in the background until it ends or its timeout. "+
		`Wait for it: action_status {"handle":%q,"wait_s":30}; `, act.handle)
	if len(streams) > 0 { // an upload has none
		first := act.a.kind.streams()[0]
		note += fmt.Sprintf(`follow its %s: read_output {"handle":%q,"stream":%q,"offset":%d,"wait_s":30}; `, first, act.handle, first, streams[0].Bytes)
	}
	note += fmt.Sprintf(`stop it: cancel_action {"handle":%q}.`, act.handle)
	return g.result(act.core, act.a.kind, r, act.handle, note, nil)
}

// waitFor is the wait a call asked for (nil: the server's), bounded.
func waitFor(asked *float64, def time.Duration) time.Duration {
	if asked == nil {
		return def
	}
	return min(seconds(*asked), maxWait)
}

// ActionStatusTool is the action_status tool. Its result is in the shape
// of the tool that started the action.
var ActionStatusTool = &Tool[ActionStatusInput, any]{
	Name: "action_status",
	Description: "Get an action's result by its handle, in the shape of the tool that started it (status running, " +
		"or how it ended), waiting up to wait_s for a running one to end. Cancelling this call ends the wait, " +
		"not the action; cancel_action stops it.",
	Hints: Hints{ReadOnly: true},
	Call:  (*Gateway).ActionStatus,
}

// CancelActionTool is the cancel_action tool, whose result is the one of
// action_status.
var CancelActionTool = &Tool[CancelActionInput, any]{
	Name: "cancel_action",
	Description: "Stop a running action by its handle, as cancelling its call would (SSH: the remote command is " +
		"stopped in stages and verified gone), and return its final result.",
	Hints: Hints{Destructive: true, Idempotent: true},
	Call: func(g *Gateway, ctx context.Context, in CancelActionInput, _ Progress) *ToolResult {
		return g.CancelAction(ctx, in)
	},
}

// ListActionsTool is the list_actions tool.
var ListActionsTool = &Tool[ListActionsInput, *ListActionsOutput]{
	Name: "list_actions",
	Description: "List this server's running actions and its last finished ones, newest first: handle, tool, " +
		"target, command or method and path, status, start and duration.",
	Hints: Hints{ReadOnly: true},
	Call: func(g *Gateway, ctx context.Context, in ListActionsInput, _ Progress) *ToolResult {
		return g.ListActions(ctx, in)
	},
}

// ActionStatusInput is the input of the action_status tool.
type ActionStatusInput struct {
	Handle string   `json:"handle" jsonschema:"handle of an action, from its result or list_actions"`
	WaitS  *float64 `json:"wait_s,omitempty" jsonschema:"seconds to wait for a running action to end (default: the server's wait, 50 s); 0 answers at once"`
}

// ActionStatus returns an action's result in its own tool's shape, waiting
// up to wait_s for a running one to end. Cancelling the call ends the wait,
// never the action.
func (g *Gateway) ActionStatus(ctx context.Context, in ActionStatusInput, progress Progress) *ToolResult {
	s, fail := g.ready()
	if fail != nil {
		return fail
	}
	act := g.actions.get(in.Handle)
	if act == nil {
		return g.unknownAction(in.Handle)
	}
	return g.await(ctx, act, time.Now().Add(waitFor(in.WaitS, s.core.server.Wait)), progress, nil)
}

// CancelActionInput is the input of the cancel_action tool.
type CancelActionInput struct {
	Handle string `json:"handle" jsonschema:"handle of a running action, from its result or list_actions"`
}

// CancelAction stops a running action as a cancelled call does (in stages,
// its remote processes verified gone) and returns its final result.
func (g *Gateway) CancelAction(ctx context.Context, in CancelActionInput) *ToolResult {
	if _, fail := g.ready(); fail != nil {
		return fail
	}
	act := g.actions.get(in.Handle)
	if act == nil {
		return g.unknownAction(in.Handle)
	}
	select {
	case <-act.done:
		r := *act.finishedResult()
		r.Text = "It had already ended; nothing was stopped. " + r.Text
		return &r
	default:
	}
	if _, err := g.stop(ctx, act, errCancelAction); err != nil { // the client gave up waiting; the stop goes on
		return g.failure("the action %s is being stopped; action_status gives its result", in.Handle)
	}
	return act.finishedResult()
}

// stop cancels act with cause and waits for its end: already says it had
// ended before; an error is ctx's, which ended the wait first (the stop
// goes on).
func (g *Gateway) stop(ctx context.Context, act *liveAction, cause error) (already bool, err error) {
	select {
	case <-act.done:
		return true, nil
	default:
	}
	act.cancel(cause)
	select {
	case <-act.done:
		return false, nil
	case <-ctx.Done():
		return false, context.Cause(ctx)
	}
}

func (g *Gateway) unknownAction(handle string) *ToolResult {
	return g.failure("no action %q is known to this server: action_status and cancel_action know the actions it ran since it started, "+
		"running ones and the last %d finished (list_actions lists them); read_output and search_output still read a finished action's output by its handle",
		output.Clip(handle, 80), keepFinished)
}

// ListActionsInput is the input of the list_actions tool.
type ListActionsInput struct {
	Status string `json:"status,omitempty" jsonschema:"only actions with this status: running, or how they ended"`
}

// ActionInfo is one action in list_actions.
type ActionInfo struct {
	Handle string `json:"handle"`
	Tool   string `json:"tool"`
	Target string `json:"target"`
	// Command is the SSH command; Method and Path the HTTP request. Both
	// are clipped.
	Command    string    `json:"command,omitempty"`
	Method     string    `json:"method,omitempty"`
	Path       string    `json:"path,omitempty"`
	Status     Status    `json:"status"`
	Started    time.Time `json:"started"`
	DurationMS int64     `json:"duration_ms"`
	// Background is set when the action went on after its call returned.
	Background bool `json:"background,omitempty"`
}

// ListActionsOutput is the structured result of list_actions.
type ListActionsOutput struct {
	Actions []ActionInfo `json:"actions"`
	// Omitted counts the older actions left out to fit result_bytes.
	Omitted int `json:"omitted,omitempty"`
}

// listClip bounds the command or path of each action in list_actions.
const listClip = 160

// ListActions lists the running actions and the last finished ones, newest
// first.
func (g *Gateway) ListActions(_ context.Context, in ListActionsInput) *ToolResult {
	s, fail := g.ready()
	if fail != nil {
		return fail
	}
	out := &ListActionsOutput{Actions: []ActionInfo{}}
	running := 0
	for _, act := range g.actions.list() {
		act.mu.Lock()
		info := ActionInfo{Handle: act.handle, Tool: act.intent.Tool, Target: g.redactString(act.intent.Target), // a fan-out's globs are the agent's
			Command: output.Clip(g.redactString(act.intent.Command), listClip), Method: act.intent.Method,
			Path: output.Clip(g.redactString(act.intent.Path), listClip), Status: act.status, Started: act.started.UTC(),
			Background: act.background}
		end := act.ended
		act.mu.Unlock()
		if in.Status != "" && string(info.Status) != in.Status {
			continue
		}
		if info.Status == StatusRunning {
			running++
			end = time.Now()
		}
		info.DurationMS = end.Sub(info.Started).Milliseconds()
		out.Actions = append(out.Actions, info)
	}
	for {
		text := fmt.Sprintf("%s known (%d running), newest first.", output.Plural(len(out.Actions)+out.Omitted, "action"), running)
		if out.Omitted > 0 {
			text += fmt.Sprintf(" The %d oldest are left out to fit the result.", out.Omitted)
		}
		text += ` action_status {"handle":...} gives one's result; cancel_action stops a running one.`
		size, err := output.ResultSize(out, text)
		if err != nil {
			return g.failure("%v", err)
		}
		if size <= s.core.server.ResultBytes || len(out.Actions) == 0 {
			return &ToolResult{Structured: out, Text: text}
		}
		out.Actions, out.Omitted = out.Actions[:len(out.Actions)-1], out.Omitted+1
	}
}
