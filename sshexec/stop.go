package sshexec

import (
	"context"
	"errors"
	"fmt"
	"io"
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
// are sent from a second session to the command's process group and every
// process carrying its run id. It reports whether all of them were
// verified gone, and if not, why.
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
		if useSignal && !r.signal(sig) {
			useSignal = false
			r.conn.logger.Debug("server refused a signal request; killing the process group from a second session", "signal", sig)
		}
		if !useSignal {
			r.kill(sig, grace)
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

// kill sends sig, from a second session, to the command's process group
// and to every process that carries its run id.
func (r *run) kill(sig string, grace time.Duration) {
	pgid := r.s.waitPGID(grace)
	if pgid == 0 {
		return
	}
	if _, err := r.control(killScript(sig, pgid, r.runID)); err != nil {
		r.conn.logger.Debug("kill the command's processes", "signal", sig, "error", err.Error())
	}
}

// verify reports whether every process of the command (its process group
// and every process carrying its run id) is gone, killing what is left for
// up to the grace period; when it cannot tell, or something survives, it
// says why.
func (r *run) verify() (bool, string) {
	pgid := r.s.waitPGID(0)
	if pgid == 0 {
		return false, "the command never reported its process group"
	}
	deadline := time.Now().Add(r.target.stopGrace())
	// Each look is a control session (sh, ps, awk) on the host: backing
	// off keeps many stops at once (a fan-out's cancel) from starving the
	// very processes they wait for.
	pause := 20 * time.Millisecond
	for {
		code, err := r.control(aliveScript(pgid, r.runID))
		switch {
		case err != nil:
			r.conn.logger.Debug("check the command's processes", "error", err.Error())
			return false, "could not check the target's processes: " + err.Error()
		case code == 1:
			return true, ""
		case code == 3:
			return false, "the target's processes cannot be listed (no /proc, no ps)"
		case code != 0:
			return false, fmt.Sprintf("the check of the target's processes failed with status %d", code)
		case time.Now().After(deadline):
			return false, "processes of the command were still running after repeated KILL"
		}
		r.control(killScript("KILL", pgid, r.runID))
		time.Sleep(pause)
		pause = min(2*pause, 200*time.Millisecond)
	}
}

// control runs a control script in a new session, outside the session
// slots, on the run's connection or, when that is gone, on a new one, and
// returns its exit status. For a command under sudo it runs as root too:
// the processes it must find and stop are root's.
func (r *run) control(script string) (int, error) {
	command, stdin := script, []byte(nil)
	if r.req.Sudo {
		command, stdin = sudoControl(script, r.req.SudoPassword), sudoStdin(r.req.SudoPassword)
	}
	ctx, cancel := context.WithTimeout(context.Background(), controlTimeout+r.target.keepalive())
	defer cancel()
	c := r.conn
	if !c.alive() {
		var err error
		if c, err = r.pool.conn(ctx, r.target); err != nil {
			return 0, err
		}
	}
	ch, reqs, err := c.open(ctx)
	if err != nil {
		return 0, err
	}
	defer context.AfterFunc(ctx, func() { ch.Close() })()
	ok, err := ch.SendRequest("exec", true, ssh.Marshal(&struct{ Command string }{command}))
	if err != nil || !ok {
		ch.Close()
		ssh.DiscardRequests(reqs)
		return 0, fmt.Errorf("run %q: refused or failed: %v", command, err)
	}
	if len(stdin) > 0 {
		ch.Write(stdin) // a failure shows in the exit status
	}
	ch.CloseWrite()
	// The output is a line at most and fits the window, so stderr can wait.
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
			return 0, fmt.Errorf("run %q: %w", command, ctx.Err())
		}
		return 0, fmt.Errorf("run %q: no exit status", command)
	}
	return code, nil
}
