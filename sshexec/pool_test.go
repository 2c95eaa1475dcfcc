package sshexec

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
)

// logins counts the logins sshd accepted so far.
func logins(s *sshtest.Server) int { return strings.Count(s.Log(), "Accepted publickey") }

func TestConnectionReuse(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	tg := target(s)
	for i := range 5 {
		if out, err := runCmd(t, p, tg, "echo ok"); err != nil || out.stdout != "ok\n" {
			t.Fatalf("run %d: %+v, %v", i, out, err)
		}
	}
	if got := logins(s); got != 1 {
		t.Errorf("logins for 5 runs: got %d; want 1", got)
	}
}

// TestMaxSessions runs more commands at once than the server allows on a
// connection: they wait for a slot instead of failing.
func TestMaxSessions(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{MaxSessions: 2})
	p := newPool(t)
	for _, tc := range []struct {
		name        string
		maxSessions int
	}{
		{"configured", 2},
		{"learned from refusals", 10}, // OpenSSH's default, more than the server allows
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := target(s)
			tg.Name, tg.MaxSessions = tc.name, tc.maxSessions
			var wg sync.WaitGroup
			errs := make(chan error, 5)
			for i := range 5 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					var out syncbuf.Buffer
					res, err := p.Run(ctx, tg, Request{Command: fmt.Sprintf("sleep 0.2; echo %d", i), Stdout: &out})
					if err == nil && (res.Status != StatusExited || out.String() != fmt.Sprintf("%d\n", i)) {
						err = fmt.Errorf("got %+v, %q", res, out.String())
					}
					errs <- err
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Errorf("run: %v", err)
				}
			}
		})
	}
	if got := logins(s); got != 2 {
		t.Errorf("logins: got %d; want 2 (one connection per target)", got)
	}
}

// runSleeper starts a silent remote command on tg and returns once it
// runs, with the pid of its shell; its result arrives on the channel.
func runSleeper(t *testing.T, s *sshtest.Server, p *Pool, tg *Target) (<-chan output, int) {
	t.Helper()
	return runSleeperFor(t, s, p, tg, "sleep 1000")
}

// runSleeperFor is runSleeper for another command.
func runSleeperFor(t *testing.T, s *sshtest.Server, p *Pool, tg *Target, command string) (<-chan output, int) {
	t.Helper()
	dir := s.UserDir(t)
	done := make(chan output, 1)
	go func() {
		out, err := runCmd(t, p, tg, fmt.Sprintf("echo $$ > %s/pid; %s", dir, command))
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		done <- out
	}()
	pid := sshtest.ReadPID(t, filepath.Join(dir, "pid"), 10*time.Second)
	return done, pid
}

// TestServerCrash kills sshd while a command runs: the call fails at once,
// the next call fails fast while sshd is down, and works once it is back.
func TestServerCrash(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	tg := target(s)
	done, _ := runSleeper(t, s, p, tg)
	s.Crash()
	select {
	case out := <-done:
		if out.res == nil || out.res.Status != StatusFailed || out.res.RemoteStopped == nil || *out.res.RemoteStopped {
			t.Errorf("got %+v; want status failed, remote_stopped false", out.res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of the crash")
	}
	// Fails fast: the dial is refused, nothing waits for a timeout.
	if _, err := runCmd(t, p, tg, "true"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Run while sshd is down: got %v; want the connection refused", err)
	}
	s.Restart()
	assertPrompt(t, p, tg)
}

// TestWedgedConnection freezes the server side of the pooled connection:
// the keepalive closes it, and calls redial instead of hanging.
func TestWedgedConnection(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	tg := target(s)
	tg.Keepalive = 300 * time.Millisecond
	assertPrompt(t, p, tg)
	s.Freeze()
	assertPrompt(t, p, tg) // the open times out after the keepalive interval

	// A connection frozen while idle is found dead by the keepalive alone.
	p.mu.Lock()
	c := p.targets[tg.poolKey()].conns[0]
	p.mu.Unlock()
	s.Freeze()
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		t.Fatal("keepalive did not close a wedged connection within 5s")
	}
	assertPrompt(t, p, tg)
}

func TestJumpHost(t *testing.T) {
	jump := sshtest.Start(t, sshtest.Options{})
	final := sshtest.Start(t, sshtest.Options{Config: []string{"AllowTcpForwarding no"}})
	p := newPool(t)
	tg := target(final)
	tg.Name = "final"
	tg.Jump = target(jump)
	tg.Jump.Name = "bastion"
	out, err := runCmd(t, p, tg, "echo $SSH_CONNECTION")
	if err != nil {
		t.Fatalf("Run through the jump host: %v", err)
	}
	// The final server sees the connection come from the jump server.
	if fields := strings.Fields(out.stdout); len(fields) != 4 || fields[3] != fmt.Sprint(final.Port) {
		t.Errorf("SSH_CONNECTION: got %q; want a connection to port %d", out.stdout, final.Port)
	}
	if logins(jump) != 1 || logins(final) != 1 {
		t.Errorf("logins: jump %d, final %d; want 1 each", logins(jump), logins(final))
	}

	// The final host's key is checked against the final host's name: a
	// known_hosts that only vouches for the jump host's key fails.
	wrong := *tg
	wrong.Name, wrong.KnownHostsPath = "final-wrong", jump.KnownHosts
	_, err = runCmd(t, p, &wrong, "true")
	var hk *HostKeyError
	if !errors.As(err, &hk) || hk.Host != final.Addr() || hk.Fingerprint != final.Fingerprint() {
		t.Fatalf("got %v; want a *HostKeyError for %s with %s", err, final.Addr(), final.Fingerprint())
	}
}

// TestCloseDuringRun closes the pool under a running command: the call
// ends with status failed instead of hanging, and later calls fail.
func TestCloseDuringRun(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := NewPool(testLogger())
	tg := target(s)
	done, pid := runSleeper(t, s, p, tg)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// Closing the pool drops the connection; the remote dead-man switch
	// stops the command.
	if !sshtest.WaitGone(pid, 30*time.Second) {
		t.Errorf("remote command %d still runs after Close", pid)
	}
	select {
	case out := <-done:
		if out.res == nil || out.res.Status != StatusFailed {
			t.Errorf("got %+v; want status failed", out.res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of Close")
	}
	if _, err := runCmd(t, p, tg, "true"); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("Run after Close: got %v; want ErrPoolClosed", err)
	}
	if err := p.Close(); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("second Close: got %v; want ErrPoolClosed", err)
	}
}

// TestSecondConnection fills the sessions of one connection: the next
// command opens a second connection instead of waiting, and once the
// target's MaxConnections are full, Acquire queues until ctx ends.
func TestSecondConnection(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{MaxSessions: 2})
	p := NewPool(testLogger()) // closed below, while commands run
	tg := target(s)
	tg.MaxSessions, tg.MaxConnections = 2, 2 // one run per connection, one kept for stopping
	var running []<-chan output
	for range 2 {
		done, _ := runSleeper(t, s, p, tg) // returns once the command runs
		running = append(running, done)
	}
	if got := logins(s); got != 2 {
		t.Errorf("logins with two commands running: got %d; want 2 (a second connection)", got)
	}

	l, err := p.Acquire(context.Background(), tg, 200*time.Millisecond)
	var qe *QueueError
	if !errors.As(err, &qe) || qe.InUse != 2 || qe.Connections != 2 {
		if l != nil {
			l.Release()
		}
		t.Fatalf("Acquire with every session in use: got %v; want a *QueueError with 2 sessions in use on 2 connections", err)
	}
	if got := logins(s); got != 2 {
		t.Errorf("logins after queueing: got %d; want still 2 (MaxConnections)", got)
	}

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, done := range running {
		<-done
	}
}

// TestLeaseRelease takes the only run slot and gives it back unused: the
// next command runs on the same connection.
func TestLeaseRelease(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{MaxSessions: 2})
	p := newPool(t)
	tg := target(s)
	tg.MaxSessions = 2
	l, err := p.Acquire(context.Background(), tg, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	l.Release() // a second Release does nothing
	if _, err := l.Run(context.Background(), Request{Command: "true"}); err == nil {
		t.Errorf("Run on a released lease: got no error")
	}
	if out, err := runCmd(t, p, tg, "echo ok"); err != nil || out.stdout != "ok\n" {
		t.Errorf("after Release: got %+v, %v", out, err)
	}
	if got := logins(s); got != 1 {
		t.Errorf("logins: got %d; want 1", got)
	}
}

// TestCommandRefused sends what would make sshd drop the whole connection
// (a NUL byte, a request over its packet limit) while another command runs
// on that connection: both are refused before anything is sent, and the
// running command is untouched.
func TestCommandRefused(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	tg := target(s)
	done, _ := runSleeperFor(t, s, p, tg, "sleep 2; echo survived")
	for _, command := range []string{"echo a\x00b", strings.Repeat("'", 100<<10)} {
		_, err := runCmd(t, p, tg, command)
		var ce *CommandError
		if !errors.As(err, &ce) {
			t.Errorf("command of %d bytes: got %v; want a *CommandError", len(command), err)
		}
	}
	if out := <-done; out.res == nil || out.res.Status != StatusExited || out.stdout != "survived\n" {
		t.Errorf("the command sharing the connection: got %+v; want it to end by itself", out)
	}
	if got := logins(s); got != 1 {
		t.Errorf("logins: got %d; want 1 (the connection was never dropped)", got)
	}
}
