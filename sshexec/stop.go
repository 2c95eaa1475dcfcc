package sshexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// controlTimeout bounds one control command (kill, check) on top of the
// keepalive interval: a login shell can be slow to start.
const controlTimeout = 10 * time.Second

// stop ends the running command in stages, each given the target's grace
// period: TERM, KILL, closing the session (which also fires the wrapper's
// dead-man switch), closing the connection. Signals go as "signal" requests
// with want-reply; once the server refuses one (or with StopWrapper), they
// are sent from a second session to the command's processes (killScript).
// A supervisor (see supervisor) gets TERM, which it survives while it
// stops its descendants, and never KILL: the KILL goes to its descendants
// from a second session, and it ends when they are gone. It reports
// whether all of them were verified gone, and if not, why.
func (r *run) stop() (bool, string) {
	grace := r.target.stopGrace()
	useSignal := r.target.StopMode != StopWrapper
	// A command stopped right after it started may not have reported its
	// process group yet; without it, nothing could be verified.
	r.s.waitPGID(grace)
	for _, sig := range []string{"TERM", "KILL"} {
		if r.s.ended() {
			return r.verify()
		}
		sub := r.s.info().sub
		viaSignal := useSignal && !(sub && sig == "KILL")
		if viaSignal && !r.signal(sig) {
			useSignal, viaSignal = false, false
			r.conn.logger.Debug("server refused a signal request; killing the process group from a second session", "signal", sig)
		}
		if !viaSignal {
			r.kill(sig, grace)
		}
		if sub && sig == "TERM" && !r.req.Sudo {
			// The supervisor finishes the stop even if this client is
			// lost now. Under sudo the watcher stays: only it could kill
			// root's processes then.
			r.s.standDown()
		}
		if r.s.wait(grace) {
			return r.verify()
		}
	}
	r.s.ch.Close()
	if r.s.wait(grace) {
		return r.verify()
	}
	r.conn.close(errors.New("closed the connection of a command that did not stop"))
	<-r.s.done
	return r.verify()
}

// signal sends sig as a "signal" request and reports whether the server
// accepted it.
func (r *run) signal(sig string) bool {
	ok := false
	r.bounded(func() {
		var err error
		ok, err = r.s.ch.SendRequest("signal", true, ssh.Marshal(&struct{ Signal string }{sig}))
		ok = ok && err == nil
	})
	return ok
}

// bounded runs f, closing the connection if f takes longer than the
// keepalive interval: the server is not answering.
func (r *run) bounded(f func()) {
	d := r.target.keepalive()
	t := time.AfterFunc(d, func() {
		r.conn.close(fmt.Errorf("no reply within %v", d))
	})
	defer t.Stop()
	f()
}

// kill sends sig, from a second session, to the command's processes (see
// killScript).
func (r *run) kill(sig string, grace time.Duration) {
	if r.s.waitPGID(grace) == 0 {
		return
	}
	if _, _, err := r.control(killScript(sig, r.s.info(), r.runID)); err != nil {
		r.conn.logger.Debug("kill the command's processes", "signal", sig, "error", err.Error())
	}
}

// verify reports whether every process of the command is gone, killing
// what is left for up to the grace period, and at least minKills times:
// on a loaded host one look can take longer than the grace period, and a
// process that a KILL ends at once (the dead-man watcher, which a session
// that ended fires, in the second before its own KILL) has not survived
// one. When it cannot tell, or something survives, it says why (see
// aliveScript). Every process the command started is seen where the
// supervisor ran it: while the supervisor lives, as its descendants; once
// it ended after its last line, none is left. Elsewhere (no perl, not
// Linux, the supervisor killed) processes that left the command's group
// and do not show its run id are looked for in a census, and any that
// might be the command's make it unverified, by pid and name.
func (r *run) verify() (bool, string) {
	if r.s.waitPGID(0) == 0 {
		return false, "the command never reported its process group"
	}
	w := r.s.info()
	deadline := time.Now().Add(r.target.stopGrace())
	// Each look is a control session (sh, grep, awk) on the host: backing
	// off keeps many stops at once (a fan-out's cancel) from starving the
	// very processes they wait for.
	pause := 20 * time.Millisecond
	for kills := 0; ; kills++ {
		clean := w.sub && r.s.ended() && r.s.reaped.Load()
		code, out, err := r.control(aliveScript(w, r.runID, clean))
		switch {
		case err != nil:
			r.conn.logger.Debug("check the command's processes", "error", err.Error())
			return false, "could not check the target's processes: " + err.Error()
		case code == 1:
			return true, ""
		case code == 3:
			return false, "the target's processes cannot be listed (no /proc, no ps)"
		case code == 4:
			return false, suspects(out)
		case code == 5:
			return false, "the target has no /proc, where processes of the command that left its process group and do not show its run id (setsid, a cleared environment) could be looked for"
		case code != 0:
			return false, fmt.Sprintf("the check of the target's processes failed with status %d", code)
		case kills >= minKills && time.Now().After(deadline):
			return false, "processes of the command were still running after repeated KILL: " + procList(out, "A")
		}
		r.control(killScript("KILL", w, r.runID))
		time.Sleep(pause)
		pause = min(2*pause, 200*time.Millisecond)
	}
}

// minKills is how many times verify sends KILL to what it finds alive
// before it may give up.
const minKills = 2

// maxNamed is how many processes a reason names.
const maxNamed = 5

// procLines returns the fields of the lines of out that start with kind
// (see __agw_procs check): pid, comm and, for a suspect, why.
func procLines(out, kind string) [][]string {
	var lines [][]string
	for line := range strings.SplitSeq(out, "\n") {
		if f := strings.SplitN(strings.TrimRight(line, "\r"), "\t", 4); f[0] == kind && len(f) >= 3 {
			lines = append(lines, f[1:])
		}
	}
	return lines
}

// procList names the processes of kind in out: "pid 42 (sleep), ...".
func procList(out, kind string) string {
	lines := procLines(out, kind)
	var names []string
	for i, f := range lines {
		if i == maxNamed {
			names = append(names, fmt.Sprintf("and %d more", len(lines)-maxNamed))
			break
		}
		names = append(names, fmt.Sprintf("pid %s (%s)", f[0], f[1]))
	}
	if len(names) == 0 {
		return "(none named)"
	}
	return strings.Join(names, ", ")
}

// suspects says which processes the census could not tell from the
// command's, and why.
func suspects(out string) string {
	lines := procLines(out, "S")
	var parts []string
	for i, f := range lines {
		if i == maxNamed {
			parts = append(parts, fmt.Sprintf("and %d more", len(lines)-maxNamed))
			break
		}
		why := "it cannot be inspected"
		if len(f) > 2 {
			why = f[2]
		}
		if f[1] == "?" && strings.HasPrefix(why, "the ") {
			parts = append(parts, why)
			continue
		}
		parts = append(parts, fmt.Sprintf("pid %s (%s) started during the command outside its process tree, and %s", f[0], f[1], why))
	}
	if len(parts) == 0 {
		return "processes that might be the command's could not be told from others"
	}
	return "cannot verify that the command's processes are gone: " + strings.Join(parts, "; ")
}

// control runs a control script in a new session, outside the session
// slots, on the run's connection or, when that is gone, on a new one, and
// returns its exit status and the start of its output. For a command under
// sudo it runs as root too: the processes it must find and stop are
// root's. Each first removes what the run may have left in $TMPDIR (see
// cleanupScript), as the login user.
func (r *run) control(script string) (int, string, error) {
	command, stdin := cleanupScript(r.runID)+script, []byte(nil)
	if r.req.Sudo {
		command = cleanupScript(r.runID) + sudoControl(script, r.req.SudoPassword, r.runID)
		stdin = sudoStdin(r.req.SudoPassword)
	}
	ctx, cancel := context.WithTimeout(context.Background(), controlTimeout+r.target.keepalive())
	defer cancel()
	ch, reqs, release, err := r.controlSession(ctx, command)
	if err != nil {
		return 0, "", err
	}
	defer release()
	defer context.AfterFunc(ctx, func() { ch.Close() })()
	ok, err := ch.SendRequest("exec", true, ssh.Marshal(&struct{ Command string }{command}))
	if err != nil || !ok {
		ch.Close()
		ssh.DiscardRequests(reqs)
		return 0, "", fmt.Errorf("run %q: refused or failed: %v", command, err)
	}
	if len(stdin) > 0 {
		ch.Write(stdin) // a failure shows in the exit status
	}
	ch.CloseWrite()
	// The output is a few lines and fits the window, so stderr can wait.
	var out strings.Builder
	io.Copy(&out, io.LimitReader(ch, maxControlOutput))
	io.Copy(io.Discard, ch)
	io.Copy(io.Discard, ch.Stderr())
	code := -1
	for req := range reqs {
		if req.Type == "exit-status" {
			var m struct{ Status uint32 }
			if ssh.Unmarshal(req.Payload, &m) == nil {
				code = int(m.Status)
			}
		}
		if req.WantReply {
			req.Reply(false, nil)
		}
	}
	ch.Close()
	if code < 0 {
		if ctx.Err() != nil {
			return 0, "", fmt.Errorf("run %q: %w", command, ctx.Err())
		}
		return 0, "", fmt.Errorf("run %q: no exit status", command)
	}
	return code, out.String(), nil
}

// controlSession opens a session for command beside the run's: on its
// connection, or on a new one where it is gone, or, for a run under a
// certificate that runs only its command, on a connection of its own with
// a certificate for command. Call release once the session is done.
func (r *run) controlSession(ctx context.Context, command string) (ssh.Channel, <-chan *ssh.Request, func(), error) {
	c, release := r.conn, func() {}
	if r.grant != nil {
		var err error
		if c, err = r.pool.certified(ctx, r.target, controlGrant(*r.grant, command)); err != nil {
			return nil, nil, nil, err
		}
		release = c.release
	} else if !c.alive() {
		var err error
		if c, err = r.pool.conn(ctx, r.target); err != nil {
			return nil, nil, nil, err
		}
	}
	ch, reqs, err := c.open(ctx)
	if err != nil {
		release()
		return nil, nil, nil, err
	}
	return ch, reqs, release, nil
}

// maxControlOutput bounds what is kept of a control script's output.
const maxControlOutput = 64 << 10
