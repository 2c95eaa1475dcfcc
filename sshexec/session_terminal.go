package sshexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// TerminalRequest is an interactive program to run on a pseudo-terminal
// of the target: a login shell, a REPL, a full-screen program.
type TerminalRequest struct {
	// Command is run by the login user's shell inside the remote
	// wrapper, as Request.Command is; "" runs LoginShell.
	Command string
	// Cols and Rows are the terminal's size; zero means 80 and 24.
	Cols, Rows int
	// Term is the TERM the server is told; "" means "xterm-256color".
	Term string
	// Dir and Env are Request's: the directory the command starts in and
	// the variables set for it.
	Dir string
	Env map[string]string
	// Output receives what the terminal shows, as the server sends it
	// (the program's stdout and stderr merged by the terminal, with its
	// escape sequences). It is written from one goroutine at a time, and
	// should not block: the terminal is drained through it until the
	// session ends. An error from it does not stop the draining.
	Output io.Writer
}

// LoginShell is what a terminal without a command runs: the login
// user's shell, as a login shell (every POSIX shell takes -l).
const LoginShell = `exec "${SHELL:-/bin/sh}" -l`

// terminalMarkerWait is how long a terminal's output is held back while
// the wrapper's first line is awaited: a server that runs something else
// (a ForceCommand) never sends it, and its screen is shown after that.
const terminalMarkerWait = 5 * time.Second

// watcherArmWait is how long a terminal's program waits for its watcher
// to arm (see awaitWatcher) before the wrapper gives up and runs
// nothing: time for a new connection and a certificate, as a CA
// target's watcher needs, on a loaded host.
const watcherArmWait = 30 * time.Second

// A Terminal is a program running on a pseudo-terminal of a target, in
// the remote wrapper as a command of Run is: its processes are found by
// the wrapper's process group, run id and, with perl on Linux, as the
// descendants of a subreaper, and a stop is verified as Run's is. A
// server that refuses to run commands (a shell-only network device) gets
// a plain "shell" request instead: then nothing can be verified.
//
// The dead-man switch of a terminal is the hang-up: when the connection
// or the session closes (the gateway killed, its connection lost), the
// server closes the terminal, the kernel sends HUP to the session
// leader, and the supervisor (or, without one, the shell) stops what the
// program started. A network cut closes nothing: for it, a watcher runs
// in a session of its own beside the terminal's (see watch), and the
// program starts only once it is armed.
type Terminal struct {
	r     *run
	ctx   context.Context
	start time.Time
	// Shell is set when the server refused the wrapped command and runs
	// its shell instead: the session's processes cannot be verified.
	Shell bool

	// watchStop ends the dead-man switch (see watch), which closes
	// watchDone when it is done: it stands down when gone is set (the
	// session's processes were verified gone), and fires otherwise.
	watchStop, watchDone chan struct{}
	gone                 atomic.Bool

	mu     sync.Mutex // input and window changes, in order
	closed bool
	waited atomic.Bool
}

// StartTerminal starts req on the leased session: a pseudo-terminal of
// req's size, then the wrapped command (or, refused, a "shell"). It
// releases the lease when Wait returns, or at once when it returns an
// error: a *CommandError, a refusal of the terminal by the server, or a
// connection failure. ctx bounds the whole session: when it ends, Wait
// stops the program in stages, as Run does.
func (l *Lease) StartTerminal(ctx context.Context, req TerminalRequest) (*Terminal, error) {
	if !l.take() {
		return nil, errLeaseUsed
	}
	command := req.Command
	if command == "" {
		command = LoginShell
	}
	ctx, cancel := context.WithCancelCause(ctx)
	r := &run{pool: l.pool, target: l.target, req: Request{Command: command, Dir: req.Dir, Env: req.Env},
		start: time.Now(), cancel: cancel, runID: newRunID()}
	out := &lockedWriter{w: req.Output}
	r.stdout = &meter{run: r, w: out}
	r.stderr = &meter{run: r, w: out}
	t := &Terminal{r: r, ctx: ctx, start: r.start, watchStop: make(chan struct{}), watchDone: make(chan struct{})}
	fail := func(err error) (*Terminal, error) {
		cancel(nil)
		l.conn.release()
		return nil, fmt.Errorf("target %q: %w", l.target.Name, err)
	}
	script := wrap(&r.req, r.runID, armedBeside, watcherArmWait, l.target.stopGrace(), l.target.noSubreaper)
	if l.target.Auth.CA != nil {
		if err := checkCommand(&r.req, script); err != nil {
			cancel(nil)
			return nil, fmt.Errorf("target %q: %w", l.target.Name, err)
		}
		if err := l.certify(ctx, script, true); err != nil {
			cancel(nil)
			return nil, err
		}
		r.grant = &grant{keyID: l.keyID, serial: l.serial, command: script}
	}
	r.conn = l.conn
	if err := checkCommand(&r.req, script); err != nil {
		l.ch.Close()
		go ssh.DiscardRequests(l.reqs)
		return fail(err)
	}
	var err error
	r.s, err = t.open(l.ch, l.reqs, req, "exec", script)
	if errors.Is(err, errRefused) && req.Dir == "" && len(req.Env) == 0 && req.Command == "" {
		// A shell-only server (a network device): its shell, unwrapped.
		var ch ssh.Channel
		var reqs <-chan *ssh.Request
		if ch, reqs, err = l.conn.open(ctx); err == nil {
			t.Shell = true
			r.s, err = t.open(ch, reqs, req, "shell", "")
		}
	}
	if err != nil {
		return fail(err)
	}
	go t.watch()
	return t, nil
}

// watch is the terminal's dead-man switch: a closed session hangs the
// terminal up, but a network cut closes nothing, and the shell would
// outlive the gateway. Once the wrapper's line tells its processes, it
// runs watchScript in a session beside the terminal's and feeds it
// heartbeats until Wait ends it, after its own stop: it stands down when
// that stop verified the processes gone, and fires otherwise, as it
// would for a lost client. The wrapper runs the program once the watcher
// says it is armed (see awaitWatcher); a watcher that cannot be started
// ends the session. Without that line (a server that gave its shell)
// there is nothing it could find.
func (t *Terminal) watch() {
	defer close(t.watchDone)
	r := t.r
	select {
	case <-r.s.pgidDecided:
	case <-t.watchStop:
		return
	}
	w := r.s.info()
	if w.pid == 0 {
		return
	}
	hb := r.target.keepalive()
	command := watchScript(w, r.runID, heartbeatDeadline(hb))
	ch, reqs, release, err := r.controlSession(t.ctx, command)
	if err != nil {
		t.endUnwatched(err)
		return
	}
	defer release()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		ssh.DiscardRequests(reqs)
	}()
	ok, err := ch.SendRequest("exec", true, ssh.Marshal(&struct{ Command string }{command}))
	if err == nil && !ok {
		err = errors.New("the server refused to run it")
	}
	if err == nil {
		heartbeats(ch, hb, t.watchStop, nil)
		if t.gone.Load() {
			ch.Write([]byte{'x'}) // stand down
		}
	} else {
		t.endUnwatched(err)
	}
	ch.Close()
	<-drained
}

// endUnwatched ends a session whose watcher could not be started (err):
// its program waits for one (see awaitWatcher), and a session left
// unwatched would outlive a network cut.
func (t *Terminal) endUnwatched(err error) {
	if t.ctx.Err() != nil {
		return // ended already: no watcher was needed
	}
	r := t.r
	r.conn.logger.Warn("could not arm the dead-man switch of a terminal session, so it was ended", "target", r.target.Name, "error", err)
	r.cancel(fmt.Errorf("the session's dead-man switch could not be armed, so the session was ended: %w", err))
}

// open starts a session on ch: the terminal, then the request (exec with
// the command, or shell), and the goroutines that drain it. On an error,
// ch is closed and drained.
func (t *Terminal) open(ch ssh.Channel, reqs <-chan *ssh.Request, req TerminalRequest, request, command string) (*session, error) {
	r := t.r
	s := &session{ch: ch, streamsDone: make(chan struct{}), done: make(chan struct{}), pgidDecided: make(chan struct{}), disarm: make(chan struct{})}
	s.readers.Add(3)
	wrapped := request == "exec"
	if !wrapped {
		s.decide(wrapperInfo{}) // no wrapper: nothing to look for
	}
	go s.copy(r.stdout, ch, wrapped, terminalMarkerWait)
	go s.copy(r.stderr, ch.Stderr(), false, 0)
	s.start(reqs)
	term := req.Term
	if term == "" {
		term = "xterm-256color"
	}
	cols, rows := req.Cols, req.Rows
	if cols <= 0 {
		cols = 80
	}
	if rows <= 0 {
		rows = 24
	}
	var err error
	r.bounded(func() {
		var ok bool
		ok, err = ch.SendRequest("pty-req", true, ssh.Marshal(&ptyRequestMsg{Term: term, Columns: uint32(cols), Rows: uint32(rows), Modelist: "\x00"}))
		if err == nil && !ok {
			err = fmt.Errorf("server refused a pseudo-terminal: %w", errRefused)
		}
		if err != nil {
			return
		}
		payload := []byte(nil)
		if wrapped {
			payload = ssh.Marshal(&struct{ Command string }{command})
		}
		ok, err = ch.SendRequest(request, true, payload)
		if err == nil && !ok {
			err = fmt.Errorf("server refused to run %s: %w", request, errRefused)
		}
	})
	if err != nil {
		ch.Close()
		<-s.done
		return nil, err
	}
	return s, nil
}

// Write types p into the terminal. It blocks while the server's window
// for input is full (a program that reads nothing), until the session
// ends.
func (t *Terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, io.ErrClosedPipe
	}
	return t.r.s.ch.Write(p)
}

// Resize tells the server the terminal's new size.
func (t *Terminal) Resize(cols, rows int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return io.ErrClosedPipe
	}
	_, err := t.r.s.ch.SendRequest("window-change", false, ssh.Marshal(&struct{ Cols, Rows, Width, Height uint32 }{uint32(cols), uint32(rows), 0, 0}))
	return err
}

// Done is closed when the session ended, by itself or stopped.
func (t *Terminal) Done() <-chan struct{} { return t.r.s.done }

// Wait waits until the program ends, or until the context of
// StartTerminal ends, when it stops the program in stages (see Pool.Run),
// and returns how it ended. Either way, what the program left running is
// stopped and its processes verified gone (RemoteStopped). It
// releases the lease. Call it once.
func (t *Terminal) Wait() (*Result, error) {
	if !t.waited.CompareAndSwap(false, true) {
		return nil, errLeaseUsed
	}
	r := t.r
	defer r.conn.release()
	defer r.cancel(nil)
	res, err := r.wait(t.ctx, &Result{})
	if res.RemoteStopped == nil && r.s.waitPGID(0) != 0 {
		// The program ended by itself: what it left running (a job in
		// the background) ends with the session, unlike a command's.
		r.control(killScript("TERM", r.s.info(), r.runID))
		stopped, why := r.verify()
		res.RemoteStopped, res.Unverified = &stopped, why
	}
	if t.Shell && res.RemoteStopped != nil && !*res.RemoteStopped {
		res.Unverified = "the server runs no commands (it refused the wrapper and gave its shell), so the session's processes cannot be found"
	}
	t.gone.Store(res.RemoteStopped != nil && *res.RemoteStopped)
	close(t.watchStop)
	<-t.watchDone
	res.Duration = time.Since(t.start)
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	return res, err
}

// lockedWriter serializes the writes of a terminal's two streams into
// its one output.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.w == nil {
		return len(p), nil
	}
	return w.w.Write(p)
}
