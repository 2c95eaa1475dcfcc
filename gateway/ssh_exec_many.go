package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/policy"
)

// SSHExecManyTool is the ssh_exec_many tool.
var SSHExecManyTool = &Tool[SSHExecManyInput, *SSHExecManyOutput]{
	Name: "ssh_exec_many",
	Description: "Run one shell command on many SSH targets (names, globs such as web-*, or a group; see list_targets), " +
		"in parallel. Policy is checked on every target first: if any refuses the command, nothing runs. Returns a " +
		"summary, the results grouped (targets whose status, exit code, stdout and stderr are identical are shown " +
		"once, the largest group first) and each target's handle for action_status, read_output and search_output.",
	Hints: Hints{OpenWorld: true, Destructive: true},
	Asks:  true,
	Call:  (*Gateway).SSHExecMany,
}

// maxFanout bounds the targets of one ssh_exec_many.
const maxFanout = config.MaxGroupTargets

// maxPatternBytes bounds a name or glob in a call's targets.
const maxPatternBytes = 256

// SSHExecManyInput is the input of the ssh_exec_many tool.
type SSHExecManyInput struct {
	Targets     []string `json:"targets,omitempty" jsonschema:"SSH targets: names, or globs over them such as web-*; not with group"`
	Group       string   `json:"group,omitempty" jsonschema:"a group of SSH targets, as list_targets gives it; not with targets"`
	Command     string   `json:"command" jsonschema:"shell command to run on every target"`
	Stdin       string   `json:"stdin,omitempty" jsonschema:"text sent to each command's standard input, then end of file"`
	TimeoutS    float64  `json:"timeout_s,omitempty" jsonschema:"seconds after which each target's command is stopped; capped by each target's maximum"`
	WaitS       *float64 `json:"wait_s,omitempty" jsonschema:"seconds this call waits for every target to end (default: the server's wait, 50 s); still running then, it is returned as running with its handle and goes on in the background; 0 starts it in the background"`
	MaxParallel int      `json:"max_parallel,omitempty" jsonschema:"targets the command runs on at once (default: the server's max_parallel); at most the server's max_concurrent_actions"`
}

// SSHExecManyOutput is the structured result of ssh_exec_many.
type SSHExecManyOutput struct {
	Handle  string `json:"handle"`
	Command string `json:"command"`
	// Status is running, done (every target ended: see summary), cancelled
	// or timeout.
	Status     Status      `json:"status"`
	DurationMS int64       `json:"duration_ms"`
	Summary    ManySummary `json:"summary"`
	// Groups holds the targets whose results are identical (status, exit
	// code, stdout and stderr), each group once, the largest first.
	Groups []TargetGroup `json:"groups"`
	// Omitted says how many of the smallest groups were left out to fit
	// the result; every target's result is still in handles.
	Omitted *OmittedGroups `json:"omitted,omitempty"`
	// Handles gives each target's own action, for action_status,
	// read_output and search_output; a target whose command did not start
	// has none (its group says why).
	Handles map[string]string `json:"handles"`
	Reason  string            `json:"reason,omitempty"`
}

// ManySummary counts the targets of an ssh_exec_many by how they ended.
type ManySummary struct {
	Targets       int `json:"targets"`
	Running       int `json:"running,omitempty"`
	ExitedOK      int `json:"exited_ok"`
	ExitedNonzero int `json:"exited_nonzero"`
	Signaled      int `json:"signaled,omitempty"`
	OutputLimit   int `json:"output_limit,omitempty"`
	// Failed counts the commands that could not run (no connection, no
	// slot, a missing secret) or lost their connection.
	Failed    int `json:"failed"`
	Timeout   int `json:"timeout"`
	Cancelled int `json:"cancelled"`
}

// TargetGroup is the result the targets of a group share: their status,
// exit code and streams are the same (their streams' sha256 equal).
type TargetGroup struct {
	Targets  []string `json:"targets"`
	Status   Status   `json:"status"`
	ExitCode *int     `json:"exit_code,omitempty"`
	Signal   string   `json:"signal,omitempty"`
	// Reason is the first target's; the others' may name themselves in
	// its place.
	Reason string `json:"reason,omitempty"`
	// DidNotStart is set when the command did not start on these targets
	// (see reason); they have no streams and no handle.
	DidNotStart bool          `json:"did_not_start,omitempty"`
	Stdout      output.Stream `json:"stdout"`
	Stderr      output.Stream `json:"stderr"`
}

// OmittedGroups is what a result left out to fit result_bytes.
type OmittedGroups struct {
	Groups  int `json:"groups"`
	Targets int `json:"targets"`
}

// StatusDone is how a fan-out ends when every target ended; its summary
// says how each did.
const StatusDone Status = "done"

// fanTarget is one target of a fan-out and, once it ended, its result.
type fanTarget struct {
	name   string
	a      *action
	handle string       // "" until its action started
	group  *TargetGroup // nil until it ended: its result as a group of one
	// asked is the key of the question the target asks about the command,
	// which the fan-out's one question asked for it; "" when it asks none.
	asked string
}

// handleBytes is about what each target costs in a result's handles: its
// name, quotes and a handle.
const handleBytes = 48

// SSHExecMany runs one command on many SSH targets, at most max_parallel
// at once, each as an ssh_exec action of its own (with its own handle,
// slots and audit records, tied to the fan-out by their parent), and
// returns their results grouped. Policy is checked on every target first:
// when any denies the command, nothing runs.
func (g *Gateway) SSHExecMany(ctx context.Context, in SSHExecManyInput, progress Progress) *ToolResult {
	s, fail := g.ready()
	if fail != nil {
		return fail
	}
	if s.secretsFailed {
		s = g.refreshed(ctx, s) // a target's secret may be there now
	}
	names, label, err := fanoutTargets(s, in)
	if err != nil {
		return g.failure("%v", err)
	}
	c := s.core
	handles := 0
	for _, name := range names {
		handles += len(name) + handleBytes
	}
	if handles > c.server.ResultBytes/2 {
		return g.failure("targets: the result of %s would not fit result_bytes (%d) with each one's handle; run on fewer at once (a group or a glob that names fewer)",
			output.Plural(len(names), "target"), c.server.ResultBytes)
	}
	parallel := cmp.Or(in.MaxParallel, c.server.MaxParallel)
	k := &sshExecMany{g: g, s: s, in: in, ap: approverOf(ctx), label: label, parallel: min(max(parallel, 1), cap(c.limit.server)),
		background: waitFor(in.WaitS, c.server.Wait) == 0, list: make([]*fanTarget, len(names))}
	for i, name := range names {
		k.list[i] = &fanTarget{name: name, a: g.sshExecAction(s.cfg, s.ssh[name], in.on(name))}
	}
	return g.run(ctx, s, &action{kind: k, intent: audit.Record{Tool: "ssh_exec_many", Target: label, Command: in.Command}}, progress, in.WaitS)
}

// sshExecMany is one ssh_exec_many call: a fan-out whose execute runs an
// ssh_exec action on each target (see fanout).
type sshExecMany struct {
	g  *Gateway
	s  *state
	in SSHExecManyInput
	// ap is the call's approver, which its targets ask (an unknown host
	// key) while it runs: its action's context is not the call's.
	ap    Approver
	label string // names the targets for the audit log
	// parallel is how many targets run at once; background is set when
	// the call goes to the background at once (wait_s 0).
	parallel   int
	background bool
	// intent is the fan-out's own, from check: its targets name its handle
	// as their parent, and copy its approvals.
	intent *audit.Record

	mu   sync.Mutex   // guards the targets' handle and group
	list []*fanTarget // the targets
}

func (k *sshExecMany) streams() []string { return nil }
func (k *sshExecMany) targets() int      { return len(k.list) }

// check runs every target's check before anything runs (policy.Fanout:
// one denial denies all), and bounds the fan-out's own time: every wave
// of targets within its longest timeout and its wait for slots, and a
// minute to stop; each target's own timeout stops it sooner. Saturated:
// max_timeout has no cap.
func (k *sshExecMany) check(intent *audit.Record) (policy.Decision, error) {
	k.intent = intent
	refusals := make([]error, len(k.list))
	asks := false
	var longest time.Duration
	for i, t := range k.list {
		t.a.decision, refusals[i] = t.a.kind.check(&t.a.intent)
		asks = asks || t.a.decision.Verdict == policy.Asked
		longest = max(longest, t.a.decision.Timeout)
	}
	waves := float64((len(k.list) + k.parallel - 1) / k.parallel)
	bound := time.Duration(min(waves*float64(longest+k.s.core.server.QueueWait+time.Minute), float64(math.MaxInt64/2)))
	d := policy.Fanout(k.label, refusals, asks, bound)
	return d, d.Err
}

// execute starts the targets' actions, at most parallel at once, each
// under the state in effect when it starts and on its own goroutine
// (starting opens a session and writes the intent, which must not queue
// behind the other targets'), and waits for them.
func (k *sshExecMany) execute(ctx context.Context, _ []io.Writer, done *atomic.Int64) *ended {
	if k.ap != nil {
		ctx = WithApprover(ctx, k.ap)
	}
	sem := make(chan struct{}, k.parallel)
	own := make(chan struct{}, 1)
	own <- struct{}{}
	var wg sync.WaitGroup
	for _, t := range k.list {
		t.a.intent.Parent = k.intent.Handle
		if t.asked != "" { // the fan-out's question was this target's too
			t.a.intent.Approvals = slices.Clone(k.intent.Approvals)
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		// In the background, every target started counts against
		// max_background_actions too, as a background ssh_exec would.
		releaseBackground, err := k.g.backgroundTurn(ctx, k.s.core, k.intent.Handle, own, k.background)
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			// Not started: audited as such, with the fan-out's cause.
			releaseBackground()
			k.end(t, k.g.notStarted(ctx, k.s.core, &t.a.intent, context.Cause(ctx)))
			done.Add(1)
			continue
		}
		ts, ta, err := k.g.fanTargetNow(k.s, t, k.in)
		if err != nil {
			releaseBackground()
			<-sem
			r := k.g.failure("%v", err)
			r.status = k.g.refused(k.s.core, &t.a.intent, err)
			k.end(t, r)
			done.Add(1)
			continue
		}
		wg.Go(func() {
			defer func() {
				releaseBackground()
				<-sem
				done.Add(1)
			}()
			k.run(ctx, t, ts, ta)
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		var te *timeoutError
		if errors.As(context.Cause(ctx), &te) {
			return &ended{status: StatusTimeout, reason: te.Error()}
		}
		return &ended{status: StatusCancelled}
	}
	return &ended{status: StatusDone}
}

// run runs a, target t's action, under ts, the state in effect when it
// starts (fanTargetNow), and keeps its result.
func (k *sshExecMany) run(ctx context.Context, t *fanTarget, ts *state, a *action) {
	act, _, fail := k.g.start(ctx, ts, a, false)
	if fail != nil {
		k.end(t, fail)
		return
	}
	k.mu.Lock()
	t.handle = act.handle
	k.mu.Unlock()
	<-act.done
	k.end(t, act.finishedResult())
}

// end keeps r, the result of target t.
func (k *sshExecMany) end(t *fanTarget, r *ToolResult) {
	grp := groupOf(r)
	k.mu.Lock()
	t.group = &grp
	k.mu.Unlock()
}

// drop lets go of the stdin and the approver, and of the stdin of every
// target: one that never ran (refused, not started, or replaced after a
// reload) did not drop its own. The targets have ended.
func (k *sshExecMany) drop() {
	k.in.Stdin, k.ap = "", nil
	for _, t := range k.list {
		t.a.kind.(sender).drop()
	}
}

// finish groups the targets' results; its parts are the groups.
func (k *sshExecMany) finish(e *ended) *result {
	k.mu.Lock()
	out := groupResults(k.list)
	k.mu.Unlock()
	out.Handle, out.Command, out.Status, out.DurationMS, out.Reason = e.handle, e.command, e.status, e.duration.Milliseconds(), e.reason
	isError := e.status != StatusDone || out.Summary.ExitedOK != out.Summary.Targets
	return &result{structured: out, streams: out.streams(), what: out.describe(), isError: isError, parts: len(out.Groups)}
}

// keep is r with only its first n groups (the largest), the others
// counted in omitted; bare, a copy of it with no preview.
func (k *sshExecMany) keep(r *result, n int, bare bool) *result {
	out := r.structured.(*SSHExecManyOutput)
	all := out.Groups
	kept := *out
	kept.Groups = all[:n]
	if bare {
		kept.Groups = make([]TargetGroup, n)
		for i, grp := range all[:n] {
			for _, st := range []*output.Stream{&grp.Stdout, &grp.Stderr} {
				st.Head, st.Tail, st.Truncated = "", "", st.Bytes > 0
			}
			kept.Groups[i] = grp
		}
	}
	kept.Omitted = omitted(all[n:])
	return &result{structured: &kept, streams: kept.streams(), what: kept.describe(), isError: r.isError, parts: n}
}

// question is the one question of the fan-out for its targets that ask
// about the command (it records which in each target's asked); the
// targets then ask nothing themselves.
func (k *sshExecMany) question() *Question {
	var asking []*Question
	for _, t := range k.list {
		if t.a.decision.Verdict == policy.Asked {
			q := t.a.kind.(asker).question()
			asking = append(asking, q)
			t.asked = q.Key
		}
		t.a.approved = true
	}
	quote, in, label := k.g.quote, k.in, k.label
	var b strings.Builder
	fmt.Fprintf(&b, "Run this command on %d SSH targets (%s)? %d of them ask before it runs.\n\nCommand: %s\n",
		len(k.list), quote(label), len(asking), quote(in.Command))
	writeStdin(&b, quote, in.Stdin)
	b.WriteString("\nTargets that ask:\n")
	keys := []string{"ssh_exec_many", strconv.Itoa(len(k.list))}
	for _, q := range asking {
		fmt.Fprintf(&b, "- %s (%s)\n", q.Target, k.s.ssh[q.Target].where)
		keys = append(keys, q.Key)
	}
	return &Question{Asked: AskedCommand, Target: label, Message: b.String(),
		Remember: k.s.cfg.Approval.Remember, Timeout: k.s.cfg.Approval.Timeout, Key: questionKey(keys...)}
}

// on is the ssh_exec of the fan-out on one target.
func (in SSHExecManyInput) on(target string) SSHExecInput {
	return SSHExecInput{Target: target, Command: in.Command, Stdin: in.Stdin, TimeoutS: in.TimeoutS}
}

// fanTargetNow returns the state and the action that t, a target of the
// fan-out in called at s, starts with. Each target is an action of its
// own, which may start long after the call (one wave after another): one
// that starts after a reload runs under the configuration then in effect,
// as any call that starts then does, so that a person who tightens the
// rules while a fan-out runs stops what has not started (the pipeline
// then refuses what the new rules deny). A target the reload removed is
// refused, and so is one whose command the new rules ask a person about
// when the fan-out's question did not ask that.
func (g *Gateway) fanTargetNow(s *state, t *fanTarget, in SSHExecManyInput) (*state, *action, error) {
	cur := g.state()
	if cur == s {
		return s, t.a, nil
	}
	st, ok := cur.ssh[t.name]
	if !ok {
		return nil, nil, policy.Removed(t.name)
	}
	a := g.sshExecAction(cur.cfg, st, in.on(t.name))
	a.intent.Parent, a.intent.Approvals = t.a.intent.Parent, t.a.intent.Approvals
	d, err := a.kind.check(&a.intent)
	if err != nil {
		return cur, a, nil // the pipeline refuses it, as it does any action
	}
	// The question the target now asks must be the one the person
	// answered: the same command on the same host, user and port.
	if d.Verdict == policy.Asked && a.kind.(asker).question().Key != t.asked {
		return nil, nil, policy.Reasked(t.name)
	}
	a.approved = true
	return cur, a, nil
}

// backgroundTurn waits, when the fan-out with handle runs in the
// background, for a slot for one of its targets: the fan-out's own
// background slot (own holds its token), which one target at a time may
// use so that the fan-out always goes on, or a free one of
// max_background_actions. release gives it back. In the foreground it
// takes none, also once the fan-out's call waits for its end because no
// background slot was free. background says the fan-out is headed to the background at
// once (wait 0): until it is there, its targets use only its own slot, so
// that they never take the slot the fan-out itself is about to take.
func (g *Gateway) backgroundTurn(ctx context.Context, c *core, handle string, own chan struct{}, background bool) (release func(), err error) {
	act := g.actions.get(handle)
	if act == nil || (!background && !act.inBackground()) {
		return func() {}, nil
	}
	select {
	case <-own:
		return func() { own <- struct{}{} }, nil
	default:
	}
	// Until the fan-out is there, only its own slot; from then on, any
	// free one too; none if its call waits for its end after all (no
	// background slot was free). Waiting for its own slot alone would wait
	// for a target that holds it, maybe for that target's whole run.
	select {
	case <-own:
		return func() { own <- struct{}{} }, nil
	case <-act.left:
	case <-act.stays:
		return func() {}, nil
	case <-ctx.Done():
		return func() {}, context.Cause(ctx)
	}
	select {
	case <-own:
		return func() { own <- struct{}{} }, nil
	case c.background <- struct{}{}:
		return c.background.release, nil
	case <-ctx.Done():
		return func() {}, context.Cause(ctx)
	}
}

// fanoutTargets resolves the targets of an ssh_exec_many call and names
// them for the audit log: "group:NAME", or the names given.
func fanoutTargets(s *state, in SSHExecManyInput) (list []string, label string, err error) {
	switch {
	case (len(in.Targets) == 0) == (in.Group == ""):
		return nil, "", errors.New("give either targets (names or globs of SSH targets) or group, one of them")
	case len(in.Targets) > maxFanout || slices.ContainsFunc(in.Targets, func(p string) bool { return len(p) > maxPatternBytes }):
		return nil, "", fmt.Errorf("targets: at most %d names or globs, each at most %d bytes", maxFanout, maxPatternBytes)
	case in.Group != "":
		grp, ok := s.cfg.Group[in.Group]
		if !ok {
			return nil, "", fmt.Errorf("%s", unknownTarget("group", in.Group, slices.Sorted(maps.Keys(s.cfg.Group)), false, "", ""))
		}
		list, err = s.cfg.Targets(grp.Targets)
		label = "group:" + in.Group
	default:
		list, err = s.cfg.Targets(in.Targets)
		label = output.Clip(strings.Join(in.Targets, ","), 200)
	}
	switch {
	case err != nil:
		return nil, "", fmt.Errorf("targets: %w (list_targets shows the SSH targets and groups)", err)
	case len(list) > maxFanout:
		return nil, "", fmt.Errorf("targets: %d targets; one call runs on at most %d", len(list), maxFanout)
	}
	return list, label, nil
}

// groupResults counts the targets' results and groups the identical ones,
// the largest group first; targets still running are counted, not
// grouped.
func groupResults(targets []*fanTarget) *SSHExecManyOutput {
	out := &SSHExecManyOutput{Groups: []TargetGroup{}, Handles: map[string]string{}}
	out.Summary.Targets = len(targets)
	byKey := map[string]int{}
	for _, t := range targets {
		if t.handle != "" {
			out.Handles[t.name] = t.handle
		}
		if t.group == nil {
			out.Summary.Running++
			continue
		}
		grp := *t.group
		out.Summary.count(&grp)
		// A reason that names its target is the same as another's that
		// names its own.
		why := strings.ReplaceAll(grp.Reason, t.name, "\x00")
		key := fmt.Sprintf("%s\x00%v\x00%s\x00%s\x00%s\x00%s", grp.Status, exitOf(grp.ExitCode), grp.Signal, why, grp.Stdout.SHA256, grp.Stderr.SHA256)
		if i, ok := byKey[key]; ok {
			out.Groups[i].Targets = append(out.Groups[i].Targets, t.name)
			continue
		}
		grp.Targets = []string{t.name}
		byKey[key] = len(out.Groups)
		out.Groups = append(out.Groups, grp)
	}
	slices.SortStableFunc(out.Groups, func(a, b TargetGroup) int { return len(b.Targets) - len(a.Targets) })
	return out
}

// groupOf is the group a target's result would form alone.
func groupOf(r *ToolResult) TargetGroup {
	if o, ok := r.Structured.(*SSHExecOutput); ok {
		return TargetGroup{Status: o.Status, ExitCode: o.ExitCode, Signal: o.Signal, Reason: o.Reason, Stdout: o.Stdout, Stderr: o.Stderr}
	}
	// It did not start, or was refused: the text says why.
	return TargetGroup{Status: cmp.Or(r.status, StatusFailed), Reason: strings.TrimPrefix(r.Text, "the action did not start: "), DidNotStart: true}
}

func exitOf(code *int) any {
	if code == nil {
		return "-"
	}
	return *code
}

func (m *ManySummary) count(grp *TargetGroup) {
	switch grp.Status {
	case StatusExited:
		if grp.ExitCode != nil && *grp.ExitCode == 0 {
			m.ExitedOK++
		} else {
			m.ExitedNonzero++
		}
	case StatusSignaled:
		m.Signaled++
	case StatusOutputLimit:
		m.OutputLimit++
	case StatusTimeout:
		m.Timeout++
	case StatusCancelled:
		m.Cancelled++
	default: // failed, busy, denied
		m.Failed++
	}
}

func omitted(left []TargetGroup) *OmittedGroups {
	if len(left) == 0 {
		return nil
	}
	o := &OmittedGroups{Groups: len(left)}
	for _, grp := range left {
		o.Targets += len(grp.Targets)
	}
	return o
}

// streams are the groups' streams for the text, each group's headed by
// what its targets share, and read through its first target's handle.
func (out *SSHExecManyOutput) streams() []output.NamedStream {
	var ns []output.NamedStream
	for i := range out.Groups {
		grp := &out.Groups[i]
		if grp.DidNotStart {
			continue // no streams: describe names these groups
		}
		handle := out.Handles[grp.Targets[0]]
		heading := out.heading(i)
		// One way to read the rest, for every group, instead of a line of
		// calls for each of its streams.
		heading += fmt.Sprintf("; the rest of its output: read_output or search_output with %s's handle %q ===", grp.Targets[0], handle)
		ns = append(ns, output.NamedStream{Name: "stdout", Summary: &grp.Stdout, Handle: handle, Heading: heading, NoHint: true},
			output.NamedStream{Name: "stderr", Summary: &grp.Stderr, Handle: handle, NoHint: true})
	}
	return ns
}

// describe says in words what ran (its command, redacted) and how its
// targets ended.
func (out *SSHExecManyOutput) describe() string {
	m, command := &out.Summary, out.Command
	var b strings.Builder
	fmt.Fprintf(&b, "ssh_exec_many %q on %s: %s", output.Clip(command, 200), output.Plural(m.Targets, "target"), out.Status)
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{m.Running, "running"}, {m.ExitedOK, "exited 0"}, {m.ExitedNonzero, "exited non-zero"}, {m.Signaled, "signaled"},
		{m.OutputLimit, "stopped at output_limit"}, {m.Failed, "failed"}, {m.Timeout, "timed out"}, {m.Cancelled, "cancelled"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, " after %d ms.", out.DurationMS)
	if out.Reason != "" {
		fmt.Fprintf(&b, " Reason: %s.", out.Reason)
	}
	shown := len(out.Groups)
	if o := out.Omitted; o != nil {
		shown += o.Groups
	}
	if shown > 0 {
		fmt.Fprintf(&b, " %s of identical results (status, exit code, stdout and stderr), the largest first.", output.Plural(shown, "group"))
	}
	if o := out.Omitted; o != nil {
		verb := "are"
		if o.Groups == 1 {
			verb = "is"
		}
		fmt.Fprintf(&b, " %s, the smallest (%s), %s not shown, to fit the result (result_bytes).", output.Plural(o.Groups, "group"), output.Plural(o.Targets, "target"), verb)
	}
	b.WriteString(" Every target's own result: action_status with the target's handle from handles; its output: read_output with that handle and stream stdout or stderr.")
	for i := range out.Groups {
		if out.Groups[i].DidNotStart {
			b.WriteString("\n" + out.heading(i) + " ===")
		}
	}
	return b.String()
}

// heading names group i, its targets and how they ended.
func (out *SSHExecManyOutput) heading(i int) string {
	total := len(out.Groups)
	if out.Omitted != nil {
		total += out.Omitted.Groups
	}
	grp := &out.Groups[i]
	return fmt.Sprintf("=== group %d of %d: %s (%s): %s", i+1, total, output.Plural(len(grp.Targets), "target"), listNames(grp.Targets, 8), describeGroup(grp))
}

// describeGroup says how a group's targets ended.
func describeGroup(grp *TargetGroup) string {
	if grp.DidNotStart {
		return "did not start: " + output.Clip(grp.Reason, 300)
	}
	w := string(grp.Status)
	switch {
	case grp.ExitCode != nil:
		w += fmt.Sprintf(" with exit code %d", *grp.ExitCode)
	case grp.Signal != "":
		w += " by signal " + grp.Signal
	}
	if grp.Reason != "" {
		w += ": " + output.Clip(grp.Reason, 300)
	}
	return w
}

// listNames names the first n of names, and how many more there are.
func listNames(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + fmt.Sprintf(", and %d more", len(names)-n)
}
