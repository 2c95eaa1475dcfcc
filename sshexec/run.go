package sshexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// Request is one command to run on a target.
type Request struct {
	// Command is run by the login user's shell, as `ssh host COMMAND` does.
	Command string
	// Stdin is sent to the command, followed by end of file; nil sends end
	// of file at once.
	Stdin []byte
	// OutputLimit is the number of stdout plus stderr bytes after which the
	// command is stopped and the rest is dropped; zero means no limit.
	OutputLimit int64
	// Dir is the directory the command runs in; "" is the login
	// directory. A directory that cannot be entered ends the run before
	// the command, with exit status DirExitStatus and a line on stderr.
	Dir string
	// Env holds variables set for the command; names must be shell
	// variable names (SettableEnv). Values are passed quoted: no value can
	// change what the command is.
	Env map[string]string
	// Sudo runs the command as root under sudo. SudoPassword is sent on
	// the session's stdin (never in an argument or the environment) and
	// handed to sudo through an askpass program reading a private FIFO;
	// nil means sudo must need none (sudo -n). A refused password ends
	// the run with sudo's own exit status and message, at once. Stopping
	// and verifying the command's processes also run under sudo. Not on
	// a pseudo-terminal, which would echo the password.
	Sudo         bool
	SudoPassword []byte
	// Stdout and Stderr receive the command's streams; nil discards. They
	// are written from two goroutines and should not block: the remote
	// streams are drained through them until the session ends. An error
	// from a writer does not stop the draining.
	Stdout, Stderr io.Writer
}

// Status is how a run ended.
type Status string

const (
	StatusExited      Status = "exited"       // the command exited; see ExitCode
	StatusSignaled    Status = "signaled"     // the command was killed by a signal; see Signal
	StatusTimeout     Status = "timeout"      // the deadline of the context passed; the command was stopped
	StatusCancelled   Status = "cancelled"    // the caller cancelled; the command was stopped
	StatusOutputLimit Status = "output_limit" // OutputLimit was exceeded; the command was stopped
	StatusFailed      Status = "failed"       // the session ended without a status (connection lost)
)

// Result is the outcome of Run.
type Result struct {
	Status Status
	// ExitCode is the command's exit status, when the server sent one.
	ExitCode *int
	// Signal is the name of the signal that killed the command ("TERM").
	Signal string
	// Duration is the whole call; ConnectDuration the part until the
	// command was started (dialling, waiting for a session slot).
	Duration, ConnectDuration time.Duration
	// RemoteStopped is set when Run had to stop the command, or lost it:
	// true only when every process the command started was verified gone
	// on the target (where the wrapper is a subreaper: every descendant of
	// it, whatever left the group or the session or rewrote its
	// environment; elsewhere: its process group, every process carrying
	// its run id, and no other process of the user that started during
	// the command and cannot be shown to be someone else's); false when
	// that could not be verified, with Unverified saying why and naming
	// the processes (see the wrapper's doc in wrapper.go).
	RemoteStopped *bool
	Unverified    string
	// Reason says why the run was stopped or failed, from the
	// cancellation cause; empty for a command that ended by itself.
	Reason string
	// StdoutBytes and StderrBytes count what the command sent, including
	// bytes dropped after OutputLimit.
	StdoutBytes, StderrBytes int64
}

// CommandError refuses a command before anything is sent: a NUL byte (sshd
// drops the whole connection for one, ending every command on it) or a
// command so long that the request to run it would pass sshd's packet
// limit (the same).
type CommandError struct{ Reason string }

func (e *CommandError) Error() string { return "command refused: " + e.Reason }

// maxScriptBytes bounds the wrapped command: sshd's packet limit is
// 256 KiB, and the exec request adds a few bytes of framing.
const maxScriptBytes = 240 << 10

// checkCommand returns a *CommandError for a command that must not be
// sent, whatever its target: one call must never tear down a connection
// that other calls share, nor set the wrapper's own variables. It guards
// sshexec itself, for any caller; it is no policy: the gateway's (policy's
// decision on a call: its sizes, a NUL byte, the names of its variables)
// refuses such a call, in the agent's words, before it gets here.
func checkCommand(req *Request, script string) error {
	for name, v := range req.Env {
		switch {
		case !SettableEnv(name):
			return &CommandError{fmt.Sprintf("environment variable name %q: want %s", name, EnvNameRule)}
		case strings.IndexByte(v, 0) >= 0:
			return &CommandError{fmt.Sprintf("environment variable %s contains a NUL byte", name)}
		}
	}
	switch {
	case req.Sudo && bytes.ContainsAny(req.SudoPassword, "\x00\n"):
		return &CommandError{"the sudo password contains a NUL byte or a newline, which sudo cannot read"}
	case strings.IndexByte(req.Command, 0) >= 0:
		return &CommandError{"it contains a NUL byte"}
	case strings.IndexByte(req.Dir, 0) >= 0:
		return &CommandError{"its directory contains a NUL byte"}
	case len(script) > maxScriptBytes:
		return &CommandError{fmt.Sprintf("it is %d bytes, %d once quoted for the remote shell with its directory and environment, more than the %d an SSH server takes in one request", len(req.Command), len(script), maxScriptBytes)}
	}
	return nil
}

// OutputLimitError is the cancellation cause when a run exceeds its
// output limit.
type OutputLimitError struct{ Limit int64 }

func (e *OutputLimitError) Error() string {
	return fmt.Sprintf("output limit of %d bytes exceeded", e.Limit)
}

// Run runs req.Command on t, writing its output to req.Stdout and
// req.Stderr until the session ends, and returns how it ended. It is
// Acquire followed by Lease.Run, with ctx bounding both: a deadline of
// ctx is the run's timeout (StatusTimeout), and so is a cause that wraps
// context.DeadlineExceeded (the gateway's); its cause is the Reason.
//
// An error (and no Result) means the command was not started: invalid
// target, ErrNoCredential, *HostKeyError, *AuthError, connection failure,
// ErrPoolClosed. Once the command has started, and when ctx ends before
// it starts, Run returns a Result. When ctx ends, or the output limit is
// reached, Run stops the
// remote command in stages: TERM, KILL (as "signal" requests, or from a
// second session when the server refuses those), closing the session, and
// at last closing the connection; then it checks that every process of
// the command is gone. If a writer failed, Run returns the Result together
// with the first write error.
func (p *Pool) Run(ctx context.Context, t *Target, req Request) (*Result, error) {
	start := time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	l, err := p.Acquire(ctx, t, forever)
	if err != nil {
		if ctx.Err() == nil {
			return nil, err
		}
		// Nothing runs on the target, so there is nothing to stop.
		return &Result{Status: stopStatus(ctx), Reason: context.Cause(ctx).Error(),
			Duration: time.Since(start), ConnectDuration: time.Since(start)}, nil
	}
	return l.run(ctx, cancel, start, req)
}

// A Lease is an open session on a connection to a target, held for one
// command: Run it or Release it.
type Lease struct {
	pool   *Pool
	target *Target
	// conn, ch and reqs are nil, for a CA target, until its command is
	// known (see certify).
	conn *conn
	ch   ssh.Channel
	reqs <-chan *ssh.Request
	once sync.Once
	// keyID and serial name the certificate of a CA target (Certify).
	keyID  string
	serial uint64
}

// Certify names the certificate a lease of a CA target (Auth.CA) logs in
// with: its key id, which sshd logs with the login, and its serial, which a
// KRL can revoke. Call it before the lease is used; without it the key id
// is "actiongw" and the serial random. Other targets ignore it.
func (l *Lease) Certify(keyID string, serial uint64) { l.keyID, l.serial = keyID, serial }

// certify dials the connection of a CA target's lease, with a certificate
// whose force-command is command, and opens its session.
func (l *Lease) certify(ctx context.Context, command string, pty bool) error {
	g := grant{keyID: l.keyID, serial: l.serial, command: command, pty: pty}
	if g.keyID == "" {
		g.keyID = "actiongw"
	}
	if g.serial == 0 {
		g.serial = NewSerial()
	}
	l.keyID, l.serial = g.keyID, g.serial
	c, err := l.pool.certified(ctx, l.target, g)
	if err != nil {
		return err
	}
	ch, reqs, err := c.open(ctx)
	if err != nil {
		c.close(fmt.Errorf("open session: %w", err))
		return fmt.Errorf("target %q: open session: %w", l.target.Name, err)
	}
	l.conn, l.ch, l.reqs = c, ch, reqs
	return nil
}

// forever is a wait for a session that only ctx ends.
const forever = time.Duration(math.MaxInt64)

// Acquire opens a session on a connection to t for one command: on an
// open connection with a free session slot, else on a new connection while
// the target has fewer than MaxConnections, else when a slot frees within
// wait (a *QueueError if none does). ctx bounds it all, dialling included
// (its cause is returned). Its other errors are Run's. Waiting for a slot
// is queueing: the command has not started. A CA target's lease (Auth.CA)
// connects when its command is known, on a connection of its own; Acquire
// connects only to its jump host and, when its host key is not yet
// recorded, to the target up to its host key (a *HostKeyError).
func (p *Pool) Acquire(ctx context.Context, t *Target, wait time.Duration) (*Lease, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	if t.Auth.CA != nil {
		// Its connection is dialled for its command (see certify); an
		// unknown host key is reported now, before anything starts.
		if err := p.probe(ctx, t); err != nil {
			return nil, err
		}
		return &Lease{pool: p, target: t}, nil
	}
	for redials, refusals := 0, 0; ; {
		c, err := p.connect(ctx, t, true, wait)
		if err != nil {
			return nil, err
		}
		ch, reqs, err := c.open(ctx)
		if err == nil {
			return &Lease{pool: p, target: t, conn: c, ch: ch, reqs: reqs}, nil
		}
		var refused *ssh.OpenChannelError
		if errors.As(err, &refused) && c.refused() {
			c.release()
			continue
		}
		c.release()
		// A session that just ended may still count on the server for a
		// moment: retry a refusal a few times before reporting it.
		if refused != nil && refusals < 5 {
			refusals++
			select {
			case <-time.After(time.Duration(refusals) * 20 * time.Millisecond):
				continue
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		switch {
		case ctx.Err() != nil:
			return nil, err
		case refused != nil:
			return nil, fmt.Errorf("target %q: server refused a session: %w", t.Name, err)
		case redials > 0:
			return nil, fmt.Errorf("target %q: open session: %w", t.Name, err)
		}
		c.close(fmt.Errorf("open session: %w", err))
		redials++
	}
}

// Release gives the session back without running anything.
func (l *Lease) Release() {
	l.once.Do(func() {
		if l.conn == nil {
			return // a CA target's, never dialled
		}
		l.ch.Close()
		go ssh.DiscardRequests(l.reqs)
		l.conn.release()
	})
}

// Run runs req.Command on the leased session, as Pool.Run does; it
// releases the lease when it returns.
func (l *Lease) Run(ctx context.Context, req Request) (*Result, error) {
	start := time.Now()
	ctx, cancel := context.WithCancelCause(ctx) // the output limit ends it
	defer cancel(nil)
	return l.run(ctx, cancel, start, req)
}

// errLeaseUsed is returned by a second use of a lease, or a use after
// Release.
var errLeaseUsed = errors.New("sshexec: lease already used or released")

// take claims the lease's one use: false when it was used or released.
func (l *Lease) take() bool {
	taken := false
	l.once.Do(func() { taken = true })
	return taken
}

func (l *Lease) run(ctx context.Context, cancel context.CancelCauseFunc, start time.Time, req Request) (*Result, error) {
	if !l.take() {
		return nil, errLeaseUsed
	}
	r := &run{pool: l.pool, target: l.target, req: req, start: start, cancel: cancel, runID: newRunID()}
	r.stdout = &meter{run: r, w: req.Stdout}
	r.stderr = &meter{run: r, w: req.Stderr}
	script := r.script()
	if l.target.Auth.CA != nil {
		if err := checkCommand(&r.req, script); err != nil {
			return nil, fmt.Errorf("target %q: %w", l.target.Name, err)
		}
		if err := l.certify(ctx, script, l.target.UsePTY); err != nil {
			if ctx.Err() != nil {
				return &Result{Status: stopStatus(ctx), Reason: context.Cause(ctx).Error(), Duration: time.Since(start), ConnectDuration: time.Since(start)}, nil
			}
			return nil, err
		}
		r.grant = &grant{keyID: l.keyID, serial: l.serial, command: script}
	}
	defer l.conn.release()
	r.conn = l.conn
	res, err := r.run(ctx, l.ch, l.reqs, script)
	if res != nil {
		res.Duration = time.Since(start)
	}
	return res, err
}

// stopStatus is how a run that ctx ended stopped: at a deadline of ctx,
// or with a cause that wraps context.DeadlineExceeded (the gateway's
// timeout), a timeout; at the output limit; else cancelled.
func stopStatus(ctx context.Context) Status {
	cause := context.Cause(ctx)
	var limit *OutputLimitError
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.Is(cause, context.DeadlineExceeded):
		return StatusTimeout
	case errors.As(cause, &limit):
		return StatusOutputLimit
	default:
		return StatusCancelled
	}
}

// run is one started command.
type run struct {
	pool   *Pool
	conn   *conn
	target *Target
	req    Request
	start  time.Time
	cancel context.CancelCauseFunc
	runID  string // in the environment of every process the command starts
	// grant is the certificate of a CA target's command, whose control
	// scripts get certificates of their own (see control); nil otherwise.
	grant *grant

	stdout, stderr *meter
	total          atomic.Int64 // stdout + stderr bytes received
	limitOnce      sync.Once
	s              *session
}

// script is the command line sent for the run's command: the command
// inside the wrapper (see wrap).
func (r *run) script() string {
	arm := armedStdin
	if r.target.UsePTY {
		arm = unarmed
	}
	return wrap(&r.req, r.runID, arm, heartbeatDeadline(r.target.keepalive()), r.target.stopGrace(), r.target.noSubreaper)
}

func (r *run) run(ctx context.Context, ch ssh.Channel, reqs <-chan *ssh.Request, script string) (*Result, error) {
	markerOn := r.stderr
	if r.target.UsePTY {
		markerOn = r.stdout
	}
	r.s = startSession(ch, reqs, r.stdout, r.stderr, markerOn)
	res := &Result{}
	var err error
	hb := r.target.keepalive()
	if err = checkCommand(&r.req, script); err == nil && r.req.Sudo && r.target.UsePTY {
		err = &CommandError{"sudo on a pseudo-terminal would echo the password; set pty = false"}
	}
	if err == nil {
		// The sudo password comes first on stdin, read before anything else.
		stdin := r.req.Stdin
		if r.req.Sudo {
			stdin = append(sudoStdin(r.req.SudoPassword), stdin...)
		}
		r.bounded(func() { err = r.s.exec(r.target, script, stdin, hb) })
	} else {
		r.s.stdin.Done() // exec never ran
	}
	if err != nil {
		ch.Close()
		<-r.s.done
		var ce *CommandError
		switch {
		case ctx.Err() != nil:
			// Stopped before it started: nothing runs to be stopped.
			return &Result{Status: stopStatus(ctx), Reason: context.Cause(ctx).Error()}, nil
		case !errors.As(err, &ce) && !errors.Is(err, errRefused):
			// The connection failed while the command was being started:
			// it may be running. Kill what carries its run id, and look.
			res.Status, res.Reason = StatusFailed, fmt.Sprintf("the connection failed while starting the command: %v", err)
			r.killLost(res)
			r.counts(res)
			return res, nil
		}
		return nil, fmt.Errorf("target %q: %w", r.target.Name, err)
	}
	res.ConnectDuration = time.Since(r.start)
	return r.wait(ctx, res)
}

// wait waits for the started command to end, or for ctx to end, when it
// stops it (see stop), and completes res with how it ended.
func (r *run) wait(ctx context.Context, res *Result) (*Result, error) {
	var cause error
	select {
	case <-r.s.done:
		if ctx.Err() != nil && stopStatus(ctx) == StatusOutputLimit {
			cause = context.Cause(ctx) // the output was cut, even if the command ended
		}
	case <-ctx.Done():
		cause = context.Cause(ctx)
		stopped, why := r.stop()
		res.RemoteStopped, res.Unverified = &stopped, why
	}

	code, signal, msg := r.s.exit()
	res.ExitCode, res.Signal = code, signal
	switch {
	case cause != nil:
		res.Status, res.Reason = stopStatus(ctx), cause.Error()
	case code != nil:
		res.Status = StatusExited
	case signal != "":
		res.Status = StatusSignaled
		res.Reason = msg
	default:
		res.Status, res.Reason = StatusFailed, r.lostReason()
		r.killLost(res)
	}
	r.counts(res)
	return res, r.writeErr()
}

// killLost kills what is left of a command whose session was lost, on a
// new connection if this one is gone, and records in res whether all of it
// is verified gone.
func (r *run) killLost(res *Result) {
	if r.s.waitPGID(0) != 0 {
		r.control(killScript("KILL", r.s.info(), r.runID))
	}
	stopped, why := r.verify()
	res.RemoteStopped, res.Unverified = &stopped, why
}

func (r *run) counts(res *Result) {
	res.StdoutBytes, res.StderrBytes = r.stdout.n.Load(), r.stderr.n.Load()
}

// lostReason explains a session that ended without an exit status.
func (r *run) lostReason() string {
	// The session ends a moment before the connection is marked closed.
	select {
	case <-r.conn.done:
		return "connection lost: " + r.conn.err.Error()
	case <-time.After(100 * time.Millisecond):
		return "the server ended the session without an exit status"
	}
}

func (r *run) writeErr() error {
	if err := r.stdout.err(); err != nil {
		return fmt.Errorf("write stdout: %w", err)
	}
	if err := r.stderr.err(); err != nil {
		return fmt.Errorf("write stderr: %w", err)
	}
	return nil
}

// meter counts one stream into its writer and enforces the run's output
// limit; it never fails, so the stream is always drained.
type meter struct {
	run      *run
	w        io.Writer
	n        atomic.Int64
	errOnce  sync.Once
	firstErr atomic.Pointer[error]
}

func (m *meter) Write(p []byte) (int, error) {
	m.n.Add(int64(len(p)))
	total := m.run.total.Add(int64(len(p)))
	keep := p
	if limit := m.run.req.OutputLimit; limit > 0 && total > limit {
		keep = p[:max(0, int64(len(p))-(total-limit))]
		m.run.limitOnce.Do(func() { m.run.cancel(&OutputLimitError{limit}) })
	}
	if m.w != nil && len(keep) > 0 {
		if _, err := m.w.Write(keep); err != nil {
			m.errOnce.Do(func() { m.firstErr.Store(&err) })
		}
	}
	return len(p), nil
}

func (m *meter) err() error {
	if e := m.firstErr.Load(); e != nil {
		return *e
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
