package gateway

import (
	"context"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/internal/redact"
	"github.com/actiongw/actiongw/internal/screen"
	"github.com/actiongw/actiongw/policy"
	"github.com/actiongw/actiongw/sshexec"
)

// SSHSessionStartTool is the ssh_session_start tool.
var SSHSessionStartTool = &Tool[SSHSessionStartInput, *SSHSessionOutput]{
	Name: toolSessionStart,
	Description: "Open an interactive terminal session on an SSH target that allows sessions (allow_sessions): its login " +
		"shell, or a command (a REPL, an installer, a full-screen program), on a pseudo-terminal. Returns a handle and " +
		"the screen as a person would see it (rows of text and the cursor). Go on with ssh_session_send; " +
		"read_output and search_output read its transcript (stream \"terminal\"); cancel_action ends it, its processes " +
		"verified gone. Credentials are injected by the server and never shown.",
	Hints: Hints{OpenWorld: true, Destructive: true},
	Asks:  true,
	Call:  (*Gateway).SSHSessionStart,
}

// SSHSessionSendTool is the ssh_session_send tool.
var SSHSessionSendTool = &Tool[SSHSessionSendInput, *SSHSessionOutput]{
	Name: toolSessionSend,
	Description: "Type into a terminal session of ssh_session_start: text, then a secret from the keyring by name " +
		"(only those the target's allow_secret_input lists; its value is never shown), then named keys (Enter, Tab, " +
		"Escape, Backspace, Up, Down, Left, Right, Home, End, PageUp, PageDown, F1-F12, Ctrl-A to Ctrl-Z). Then waits " +
		"up to wait_s for the screen to match wait_for (an RE2 pattern), or without one for the output to pause, and " +
		"returns the screen and the output that arrived since the last send. Nothing to type just looks.",
	Hints: Hints{OpenWorld: true, Destructive: true},
	Call: func(g *Gateway, ctx context.Context, in SSHSessionSendInput, _ Progress) *ToolResult {
		return g.SSHSessionSend(ctx, in)
	},
}

// SSHSessionStartInput is the input of the ssh_session_start tool.
type SSHSessionStartInput struct {
	Target  string            `json:"target" jsonschema:"name of an SSH target, as list_targets gives it"`
	Command string            `json:"command,omitempty" jsonschema:"program to run on the terminal (default: the login shell)"`
	Cols    int               `json:"cols,omitempty" jsonschema:"terminal width in columns (default 80, at most 200)"`
	Rows    int               `json:"rows,omitempty" jsonschema:"terminal height in rows (default 24, at most 60)"`
	Cwd     string            `json:"cwd,omitempty" jsonschema:"directory to start in; as ssh_exec's cwd"`
	Env     map[string]string `json:"env,omitempty" jsonschema:"environment variables; only the names the target's allow_env lists"`
	WaitS   *float64          `json:"wait_s,omitempty" jsonschema:"seconds to wait for the first screen to settle (default 5)"`
}

// SSHSessionSendInput is the input of the ssh_session_send tool.
type SSHSessionSendInput struct {
	Handle  string   `json:"handle" jsonschema:"handle of a session, from ssh_session_start"`
	Text    string   `json:"text,omitempty" jsonschema:"text to type, as is (a newline is not Enter on every program: use keys)"`
	Secret  string   `json:"secret,omitempty" jsonschema:"name of a keyring item in the target's allow_secret_input to type, after text"`
	Keys    []string `json:"keys,omitempty" jsonschema:"named keys to press, after text and secret"`
	WaitFor string   `json:"wait_for,omitempty" jsonschema:"RE2 pattern to wait for on the screen's text (rows joined by newlines)"`
	WaitS   *float64 `json:"wait_s,omitempty" jsonschema:"seconds to wait for wait_for, or for the output to pause (default 10 with wait_for, else 3)"`
}

// SSHSessionOutput is the structured result of ssh_session_start and
// ssh_session_send, and of action_status on a session.
type SSHSessionOutput struct {
	Handle string `json:"handle"`
	Target string `json:"target"`
	// Status is running while the session is open; then how it ended:
	// exited, signaled, timeout (idle, or the target's max_timeout),
	// cancelled or failed.
	Status Status      `json:"status"`
	Screen screen.Text `json:"screen"`
	// Output is what arrived since the last send (or the start), as plain
	// text, its end when long; OutputBytes counts all of it.
	Output      string `json:"output,omitempty"`
	OutputBytes int64  `json:"output_bytes,omitempty"`
	// Matched says whether wait_for matched the screen.
	Matched *bool `json:"matched,omitempty"`
	// Terminal is the transcript (read_output stream "terminal"), and
	// Recording its asciicast v2 recording (stream "recording").
	Terminal      output.Stream  `json:"terminal"`
	Recording     *output.Stream `json:"recording,omitempty"`
	ExitCode      *int           `json:"exit_code,omitempty"`
	Signal        string         `json:"signal,omitempty"`
	DurationMS    int64          `json:"duration_ms"`
	RemoteStopped *bool          `json:"remote_stopped,omitempty"`
	Reason        string         `json:"reason,omitempty"`
}

// Bounds of a session's terminal and of what a send waits for.
const (
	maxCols, maxRows = 200, 60
	maxWaitForBytes  = 1024
	maxSendText      = 64 << 10
	maxKeys          = 64
	// quiet is how long the output must pause for a send (or the start)
	// without wait_for to return.
	quiet = 300 * time.Millisecond
	// lookEvery is the shortest time between two looks at the screen
	// for wait_for.
	lookEvery = 2 * time.Millisecond
	// recentBytes bounds the output kept for the next send's result.
	recentBytes = 64 << 10
)

// The tools' names, which their records carry.
const (
	toolSessionStart = "ssh_session_start"
	toolSessionSend  = "ssh_session_send"
)

// loginShell is what the audit, the question and list_actions call a
// session without a command.
const loginShell = "login shell"

// idleError ends a session nobody typed into for its idle timeout; it
// is a timeout.
type idleError struct{ d time.Duration }

func (e *idleError) Error() string {
	return fmt.Sprintf("no input for %v (session_idle_timeout)", e.d)
}
func (e *idleError) Unwrap() error { return context.DeadlineExceeded }

// SSHSessionStart opens a terminal session on an SSH target.
func (g *Gateway) SSHSessionStart(ctx context.Context, in SSHSessionStartInput, progress Progress) *ToolResult {
	s, st, fail := g.sshTarget(ctx, in.Target)
	if fail != nil {
		return fail
	}
	switch {
	case in.Cols < 0 || in.Cols > maxCols || in.Rows < 0 || in.Rows > maxRows:
		return g.failure("cols must be 1 to %d and rows 1 to %d (0: 80 and 24)", maxCols, maxRows)
	}
	command := in.Command
	if command == "" {
		command = loginShell
	}
	k := &sshSession{session: session{pool: g.ssh, target: st.target}, g: g, cfg: s.cfg, st: st, in: in,
		cols: orDefault(in.Cols, 80), rows: orDefault(in.Rows, 24), started: make(chan struct{})}
	a := &action{kind: k, intent: audit.Record{Tool: toolSessionStart, Target: in.Target, Command: command}}
	act, byCall, fail := g.start(ctx, s, a, true)
	if fail != nil {
		return fail
	}
	wait := 5 * time.Second
	if in.WaitS != nil {
		wait = min(seconds(*in.WaitS), maxWait)
	}
	k.wait(ctx, act, time.Now().Add(wait), nil)
	// The session outlives the call: the background slot start checked.
	return g.await(ctx, act, time.Now(), progress, byCall)
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// sshSession is one terminal session: its kind, which the pipeline runs
// as an action whose execute lasts as long as the session, and what the
// sends of its handle share.
type sshSession struct {
	session
	g          *Gateway
	cfg        *config.Config
	st         *sshTarget
	in         SSHSessionStartInput
	cols, rows int
	// What check decided.
	dir  string
	env  map[string]string
	idle time.Duration

	started chan struct{} // closed once term is set, or the session failed to start
	term    *sshexec.Terminal
	scr     *screen.Screen
	rec     *recorder
	shown   *shownStream // what the screen and the sends' output are fed
	touch   func()       // restarts the idle timer

	sendMu sync.Mutex // one send at a time

	mu          sync.Mutex
	recent      []byte // redacted output since the last send, its end
	recentBytes int64
	final       *screen.Text // the screen when the session ended
}

var sshSessionStreams = []string{"terminal", "recording"}

func (k *sshSession) streams() []string { return sshSessionStreams }

// check: the target allows sessions; the command (or the login shell)
// as policy decides a command, with its directory and environment; the
// target's credentials; the session limits are taken in reserve.
func (k *sshSession) check(intent *audit.Record) (policy.Decision, error) {
	c := k.cfg.SSH[k.in.Target]
	command := k.in.Command
	if command == "" {
		command = sshexec.LoginShell
	}
	// A session lives up to the target's max_timeout; idle ones end sooner.
	d := k.st.rules.Decide(policy.Command{Command: command, Cwd: k.in.Cwd, Env: k.in.Env, Timeout: c.MaxTimeout})
	if !c.AllowSessions {
		return d, &policy.DeniedError{Target: k.in.Target, Rule: "allow_sessions", Reason: "terminal sessions are not allowed on this target (allow_sessions)"}
	}
	if err := d.Err; err != nil {
		return d, err
	}
	if err := k.st.ready(nil); err != nil {
		return d, err
	}
	if err := firstError(d.DirErr, d.EnvErr); err != nil {
		return d, err
	}
	k.dir, k.env, k.idle = d.Dir, d.Env, c.SessionIdleTimeout
	intent.Cwd, intent.Env = k.dir, envLines(k.env)
	k.name(intent)
	return d, nil
}

// reserve takes a place among the target's and the server's sessions,
// then the SSH session.
func (k *sshSession) reserve(ctx context.Context, wait time.Duration) (func(), error) {
	release, err := k.g.sessions.take(k.in.Target, k.cfg.SSH[k.in.Target].MaxTerminalSessions, k.cfg.Server.MaxTerminalSessions)
	if err != nil {
		return nil, err
	}
	lease, err := k.session.reserve(ctx, wait)
	if err != nil {
		release()
		return nil, err
	}
	return func() { lease(); release() }, nil
}

func (k *sshSession) question() *Question {
	quote, in, where := k.g.quote, k.in, k.st.where
	command := loginShell
	if in.Command != "" {
		command = quote(in.Command)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Open an interactive terminal session on SSH target %q (%s)? The agent can then type anything into it.\n\nCommand: %s\n", in.Target, where, command)
	if k.dir != "" {
		fmt.Fprintf(&b, "Directory: %s\n", quote(k.dir))
	}
	parts := []string{toolSessionStart, in.Target, where, in.Command, k.dir}
	for _, name := range slices.Sorted(maps.Keys(k.env)) {
		fmt.Fprintf(&b, "Environment: %s=%s\n", quote(name), quote(k.env[name]))
		parts = append(parts, name, k.env[name])
	}
	return &Question{Asked: AskedCommand, Target: in.Target, Message: b.String(),
		Remember: k.cfg.Approval.Remember, Timeout: k.cfg.Approval.Timeout, Key: questionKey(parts...)}
}

// execute runs the session until it ends: the terminal's output goes
// through the guard (a typed secret echoed with codes between its
// characters), then, redacted, to the screen, the recording and the
// next send's output, and to the transcript's capture.
func (k *sshSession) execute(ctx context.Context, w []io.Writer, _ *atomic.Int64) *ended {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(k.idle, func() { cancel(&idleError{k.idle}) })
	defer idle.Stop()
	k.touch = func() { idle.Reset(k.idle) }
	k.scr = screen.New(k.cols, k.rows)
	defer k.scr.Close()
	k.rec = newRecorder(w[1], k.cols, k.rows)
	// One redaction for the screen, the next send's output and the
	// recording: they show the same bytes, decided at the same time.
	k.shown = &shownStream{}
	k.shown.stream = k.g.red.Load().NewStream(func(b []byte) {
		k.shown.emitted++ // under k.shown.mu: the stream emits inside Write
		k.scr.Write(b)
		k.keepRecent(b)
		k.rec.output(b)
	})
	// The screen first: a waiter woken by the transcript's bytes finds
	// them on the screen.
	tee := writerFunc(func(p []byte) (int, error) {
		k.shown.Write(p)
		return w[0].Write(p)
	})
	var typed []screen.Secret
	for _, name := range slices.Sorted(maps.Keys(k.st.inputs)) {
		typed = append(typed, screen.Secret{Name: name, Value: k.st.inputs[name]})
	}
	guard := screen.NewGuard(tee, typed)
	term, err := k.leased().StartTerminal(ctx, sshexec.TerminalRequest{Cols: k.cols, Rows: k.rows, Command: k.in.Command,
		Dir: k.dir, Env: k.env, Output: guard})
	if err != nil {
		close(k.started)
		return &ended{status: StatusFailed, reason: err.Error()}
	}
	k.term = term
	close(k.started)
	res, err := term.Wait()
	cut := res == nil || res.Status != sshexec.StatusExited
	guard.Close(cut)
	k.shown.end(cut)
	snap := k.screenText()
	k.mu.Lock()
	k.final = &snap
	k.mu.Unlock()
	if err != nil && res == nil {
		return &ended{status: StatusFailed, reason: err.Error()}
	}
	e := &ended{status: Status(res.Status), reason: res.Reason, duration: res.Duration,
		exitCode: res.ExitCode, signal: res.Signal, remoteStopped: res.RemoteStopped}
	if res.Unverified != "" {
		e.reason = strings.TrimSpace(e.reason + "; not verified stopped: " + res.Unverified)
	}
	return e
}

// shownStream is the redacted stream the screen, the sends' output and
// the recording are fed. It holds back what could begin a secret for as
// long as every stream does, however long the output pauses: a secret
// printed in two parts with a pause between is whole when it is
// decided, and neither part is ever shown. What it holds is shown at a look as heldMarker
// (after the line breaks it holds, see redact.Stream.Pending), so that a
// prompt whose last bytes happen to begin a form of a secret shows that
// something is held there rather than nothing; more output decides it.
type shownStream struct {
	mu      sync.Mutex
	stream  *redact.Stream
	emitted int64 // the writes the stream emitted
	ended   bool
}

func (s *shownStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stream.Write(p)
}

// heldMarker stands for the bytes a session's screen and output hold
// back because they may begin a secret.
const heldMarker = "[HELD]"

// pending returns what the stream holds back, as it may be shown, and
// how many writes it emitted before: a look at the screen draws it only
// if none came after.
func (s *shownStream) pending() ([]byte, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held(), s.emitted
}

// held is what the stream holds back, as it may be shown; s.mu is held.
func (s *shownStream) held() []byte {
	if s.ended {
		return nil
	}
	b, held := s.stream.Pending()
	if held {
		b = append(b, heldMarker...)
	}
	return b
}

// end ends the stream (see redact.Stream's Cut and Close).
func (s *shownStream) end(cut bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	if cut {
		s.stream.Cut()
	} else {
		s.stream.Close()
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// keepRecent keeps the end of the output for the next send's result.
func (k *sshSession) keepRecent(b []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.recentBytes += int64(len(b))
	k.recent = append(k.recent, b...)
	if n := len(k.recent) - recentBytes; n > 0 {
		k.recent = append(k.recent[:0], k.recent[n:]...)
	}
}

// takeRecent returns the output since the last call, as plain text
// (its end, when it is long), with what the stream holds back after it
// (see shownStream), and how many bytes arrived.
func (k *sshSession) takeRecent() (string, int64) {
	// The stream's lock first, as its writes take it: nothing it decides
	// can come between the output and what it holds.
	k.shown.mu.Lock()
	defer k.shown.mu.Unlock()
	held := k.shown.held()
	k.mu.Lock()
	b, n := k.recent, k.recentBytes
	k.recent, k.recentBytes = nil, 0
	k.mu.Unlock()
	return plainText(append(b, held...)), n
}

// screenText is the screen now (or as it ended), redacted whole: a
// secret the guard could not see (drawn out of order) shows on the
// rendered rows, and one split across two rows by a wrap is taken out
// of both.
func (k *sshSession) screenText() screen.Text {
	k.mu.Lock()
	final := k.final
	k.mu.Unlock()
	if final != nil {
		return *final
	}
	select {
	case <-k.started: // k.scr and k.shown are set before
	default:
		return screen.Text{Rows: []string{}}
	}
	held, emitted := k.shown.pending()
	t := k.scr.Snapshot()
	red := k.g.red.Load()
	rows := slices.Clone(t.Rows)
	for i := range rows {
		rows[i] = red.RedactString(rows[i])
	}
	for i := 0; i+1 < len(t.Rows); i++ {
		joined := t.Rows[i] + t.Rows[i+1]
		if r := red.RedactString(joined); r != rows[i]+rows[i+1] {
			rows[i], rows[i+1] = r, ""
		}
	}
	for _, s := range k.st.inputs {
		for i := range rows {
			rows[i] = strings.ReplaceAll(rows[i], string(s), "[REDACTED]")
		}
	}
	t.Rows = rows
	if _, now := k.shown.pending(); now == emitted {
		// What the stream held is still held: drawn where it goes. (Had
		// it gone on to the screen since, it would be drawn twice; it is
		// left out, and the next look shows it.)
		t.Overlay(held)
	}
	return t
}

func (k *sshSession) finish(e *ended) *result {
	out := &SSHSessionOutput{Handle: e.handle, Target: k.in.Target, Status: e.status, Screen: k.screenText(),
		Terminal: e.streams[0], ExitCode: e.exitCode, Signal: e.signal, DurationMS: e.duration.Milliseconds(),
		RemoteStopped: e.remoteStopped, Reason: e.reason}
	if e.status != StatusRunning {
		out.Recording = &e.streams[1]
	}
	isError := e.status != StatusRunning && (e.status != StatusExited || e.exitCode == nil || *e.exitCode != 0)
	return &result{structured: out, streams: []output.NamedStream{{Name: "terminal", Summary: &out.Terminal}},
		what: out.describe(e.command), isError: isError}
}

// describe says what the session is, how it is or ended, and shows the
// screen.
func (out *SSHSessionOutput) describe(command string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Terminal session %s (%q on %s): %s", out.Handle, output.Clip(command, 200), out.Target, out.Status)
	describeEnd(&b, out.ExitCode, out.Signal, out.DurationMS, out.Reason, out.RemoteStopped, "Its processes were", "Its processes could")
	if out.Matched != nil {
		fmt.Fprintf(&b, " wait_for matched: %v.", *out.Matched)
	}
	fmt.Fprintf(&b, "\nScreen (%d rows shown, cursor at row %d, column %d):\n%s\n", len(out.Screen.Rows), out.Screen.CursorRow, out.Screen.CursorCol, out.Screen)
	if out.Output != "" {
		fmt.Fprintf(&b, "Output since the last send (%d bytes):\n%s\n", out.OutputBytes, out.Output)
	}
	if out.Status == StatusRunning {
		fmt.Fprintf(&b, `Type: ssh_session_send {"handle":%q,"text":"...","keys":["Enter"]}. `, out.Handle)
	}
	return b.String()
}

// wait waits until deadline for the screen to match re (nil: for the
// output to pause for quiet), the session to end, or ctx; it reports
// whether re matched.
func (k *sshSession) wait(ctx context.Context, act *liveAction, deadline time.Time, match func(string) bool) bool {
	select {
	case <-k.started:
	case <-act.done:
		return false
	case <-ctx.Done():
		return false
	}
	limit := time.NewTimer(time.Until(deadline))
	defer limit.Stop()
	pause := time.NewTimer(quiet)
	defer pause.Stop()
	// A look renders the screen, which costs while output floods: one
	// every five times the last one's time, at least lookEvery apart.
	var next time.Time
	look := func() bool {
		if match == nil {
			return false
		}
		if wait := time.Until(next); wait > 0 {
			select {
			case <-time.After(wait):
			case <-limit.C:
				limit.Reset(0)
			case <-ctx.Done():
			}
		}
		start := time.Now()
		ok := match(k.screenText().String())
		next = time.Now().Add(max(lookEvery, 5*time.Since(start)))
		return ok
	}
	for {
		changed := act.changed.wait()
		if look() {
			return true
		}
		select {
		case <-changed:
			if match == nil {
				pause.Reset(quiet)
			}
		case <-pause.C:
			if match == nil {
				return false
			}
			// Paused: one more look, in case the last one came before
			// the last bytes.
			if look() {
				return true
			}
		case <-limit.C:
			return false
		case <-act.done:
			return match != nil && match(k.screenText().String())
		case <-ctx.Done():
			return false
		}
	}
}

// SSHSessionSend types into a session and returns its screen.
func (g *Gateway) SSHSessionSend(ctx context.Context, in SSHSessionSendInput) *ToolResult {
	s, fail := g.ready()
	if fail != nil {
		return fail
	}
	act := g.actions.get(in.Handle)
	var k *sshSession
	if act != nil {
		k, _ = act.a.kind.(*sshSession)
	}
	if k == nil {
		return g.failure("no terminal session %q is open on this server: ssh_session_start opens one, and its handle works only with the server that opened it (list_actions lists this one's)", output.Clip(in.Handle, 80))
	}
	ended := func() *ToolResult {
		r := *act.finishedResult()
		r.Text = "The session had already ended; nothing was typed. " + r.Text
		return &r
	}
	select {
	case <-act.done:
		return ended()
	default:
	}
	select {
	case <-act.done:
		return ended()
	case <-k.started:
	case <-ctx.Done():
		return g.failure("cancelled before the session started")
	}
	// What to type, all checked before any of it is.
	var keys []byte
	for i, name := range in.Keys {
		b, err := screen.Key(name)
		if err != nil || i >= maxKeys {
			if err == nil {
				err = fmt.Errorf("at most %d keys a send", maxKeys)
			}
			return g.failure("%v", err)
		}
		keys = append(keys, b...)
	}
	if len(in.Text) > maxSendText {
		return g.failure("text is %d bytes; a send types at most %d", len(in.Text), maxSendText)
	}
	var secret []byte
	if in.Secret != "" {
		switch v, ok := k.st.inputs[in.Secret]; {
		case ok:
			secret = v
		case k.st.inputErrs[in.Secret] != nil:
			return g.failure("the keyring item %q of allow_secret_input did not load: %v", in.Secret, k.st.inputErrs[in.Secret])
		default:
			return g.failure("secret %q is not one target %q lets a session type (allow_secret_input lists %s): nothing was typed",
				output.Clip(in.Secret, 80), k.in.Target, quoteList(k.cfg.SSH[k.in.Target].AllowSecretInput))
		}
	}
	var match func(string) bool
	if in.WaitFor != "" {
		if len(in.WaitFor) > maxWaitForBytes {
			return g.failure("wait_for is %d bytes; at most %d", len(in.WaitFor), maxWaitForBytes)
		}
		re, err := regexp.Compile(in.WaitFor) // RE2: linear in the screen, which is small
		if err != nil {
			return g.failure("wait_for: %v", err)
		}
		match = re.MatchString
	}
	wait := 3 * time.Second
	if match != nil {
		wait = 10 * time.Second
	}
	if in.WaitS != nil {
		wait = min(seconds(*in.WaitS), maxWait)
	}

	k.sendMu.Lock()
	defer k.sendMu.Unlock()
	if in.Text != "" || secret != nil || len(keys) > 0 {
		rec := &audit.Record{Kind: audit.KindInput, Handle: act.handle, Tool: toolSessionSend, Target: k.in.Target,
			Input: in.Text, Keys: strings.Join(in.Keys, " "), Secret: in.Secret}
		if err := g.appendAudit(s.core, rec); err != nil {
			return g.failure("nothing was typed: the input could not be written to the audit log: %v", err)
		}
		k.touch()
		k.rec.input(in.Text, in.Secret, keys)
		input := append(append([]byte(in.Text), secret...), keys...)
		if _, err := k.term.Write(input); err != nil {
			return g.failure("the session already ended, before the input could be typed: %v", err)
		}
	}
	matched := k.wait(ctx, act, time.Now().Add(wait), match)
	return g.sendResult(s.core, act, k, match, matched)
}

// sendResult is a send's result: the session's (running, or as it
// ended) with the output since the send and whether wait_for matched,
// the output shortened until the whole fits result_bytes.
func (g *Gateway) sendResult(c *core, act *liveAction, k *sshSession, match func(string) bool, matched bool) *ToolResult {
	var r *ToolResult
	select {
	case <-act.done:
		r = act.finishedResult()
	default:
		r = g.runningResult(act)
	}
	out, ok := r.Structured.(*SSHSessionOutput)
	if !ok {
		return r
	}
	o := *out
	o.Output, o.OutputBytes = k.takeRecent()
	o.Output = g.redactString(o.Output)
	if match != nil {
		o.Matched = &matched
	}
	for {
		text := g.redactString(o.describe(act.intent.Command))
		size, err := output.ResultSize(&o, text)
		if err != nil {
			return g.failure("%v", err)
		}
		if size <= c.server.ResultBytes || o.Output == "" && len(o.Screen.Rows) == 0 {
			return &ToolResult{Structured: &o, Text: text, IsError: r.IsError}
		}
		if o.Output != "" {
			o.Output = output.Clip(o.Output[len(o.Output)/2:], len(o.Output))
			if len(o.Output) < 64 {
				o.Output = ""
			}
		} else {
			o.Screen.Rows = o.Screen.Rows[1:]
		}
	}
}

// sessionCount counts the open terminal sessions, in all and by target.
type sessionCount struct {
	mu       sync.Mutex
	all      int
	byTarget map[string]int
}

// take takes a place for a session on target, or returns a *BusyError.
func (c *sessionCount) take(target string, perTarget, all int) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.byTarget[target] >= perTarget:
		return nil, &BusyError{Target: target, Limit: perTarget, Scope: "target's max_terminal_sessions"}
	case c.all >= all:
		return nil, &BusyError{Target: target, Limit: all, Scope: "server's max_terminal_sessions"}
	}
	if c.byTarget == nil {
		c.byTarget = map[string]int{}
	}
	c.byTarget[target]++
	c.all++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.byTarget[target]--
			c.all--
		})
	}, nil
}

func quoteList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
