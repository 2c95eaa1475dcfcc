package sshexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

var errTestCancel = errors.New("test cancelled the call")

// cancelWriter cancels the call on its first write.
type cancelWriter struct {
	once   sync.Once
	cancel context.CancelCauseFunc
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { w.cancel(errTestCancel) })
	return len(p), nil
}

// TestStopRunning cancels commands in each state they can be in once
// started, with signals and with the wrapper fallback, and checks that the
// remote processes are gone and that the next call completes promptly.
func TestStopRunning(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	for _, stop := range []struct {
		name string
		mode StopMode
		pty  bool
	}{{"signal", StopSignal, false}, {"wrapper", StopWrapper, false}, {"pty", StopWrapper, true}} {
		tg := target(s)
		tg.StopMode, tg.UsePTY = stop.mode, stop.pty
		for _, tc := range []struct {
			name    string
			command string // %[1]s is a directory for pid files
			// cancelOnOutput cancels from the stdout writer, else after
			// both pid files exist.
			cancelOnOutput bool
			status         Status
		}{
			{name: "producing output", command: `sleep 1000 & echo $! > %[1]s/child; echo $$ > %[1]s/pid; exec yes`, status: StatusCancelled},
			{name: "silent", command: `sleep 1000 & echo $! > %[1]s/child; echo $$ > %[1]s/pid; sleep 1000`, status: StatusCancelled},
			{name: "ignores TERM", command: `trap '' TERM; sleep 1000 & echo $! > %[1]s/child; echo $$ > %[1]s/pid; wait; wait`, status: StatusCancelled},
			{name: "while writing the result", cancelOnOutput: true,
				command: `sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > %[1]s/child; echo $$ > %[1]s/pid; echo result; sleep 1000`, status: StatusCancelled},
		} {
			t.Run(stop.name+"/"+tc.name, func(t *testing.T) {
				if stop.pty {
					s.RequirePTY(t)
				}
				dir := s.UserDir(t)
				ctx, cancelTimeout := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancelTimeout()
				ctx, cancel := context.WithCancelCause(ctx)
				defer cancel(nil)
				var stdout io.Writer = io.Discard
				if tc.cancelOnOutput {
					stdout = &cancelWriter{cancel: cancel}
				}
				type ran struct {
					res *Result
					err error
				}
				done := make(chan ran, 1)
				go func() {
					res, err := p.Run(ctx, tg, Request{Command: fmt.Sprintf(tc.command, dir), Stdout: stdout})
					done <- ran{res, err}
				}()
				pid := sshtest.ReadPID(t, filepath.Join(dir, "pid"), 10*time.Second)
				child := sshtest.ReadPID(t, filepath.Join(dir, "child"), 10*time.Second)
				start := time.Now()
				cancel(errTestCancel)
				var r ran
				select {
				case r = <-done:
				case <-time.After(15 * time.Second):
					t.Fatal("Run did not return within 15s of the cancel")
				}
				elapsed := time.Since(start)
				if r.err != nil {
					t.Fatalf("Run: %v", r.err)
				}
				if r.res.Status != tc.status {
					t.Errorf("status: got %q; want %q (reason %q)", r.res.Status, tc.status, r.res.Reason)
				}
				if r.res.Reason != errTestCancel.Error() {
					t.Errorf("reason: got %q; want %q", r.res.Reason, errTestCancel.Error())
				}
				if r.res.RemoteStopped == nil || !*r.res.RemoteStopped {
					t.Errorf("remote stopped: got %v; want true", r.res.RemoteStopped)
				}
				for _, id := range []int{pid, child} {
					if !sshtest.WaitGone(id, 2*time.Second) {
						t.Errorf("remote process %d still runs after Run returned", id)
					}
				}
				t.Logf("cancel to result: %v", elapsed)
				assertPrompt(t, p, tg)
			})
		}
	}
}

// assertPrompt checks that a further call on tg completes: nothing of the
// pool stays stuck (runCmd's safety timeout ends a call that would hang).
func assertPrompt(t *testing.T, p *Pool, tg *Target) {
	t.Helper()
	out, err := runCmd(t, p, tg, "echo ok")
	if err != nil || out.res.Status != StatusExited || strings.TrimRight(out.stdout, "\r\n") != "ok" {
		t.Fatalf("next Run: got %+v, %q, %v; want exited with ok", out.res, out.stdout, err)
	}
}

// TestStopBeforeStart cancels calls that have not started a command: before
// the call, while waiting for a session slot, and while connecting to a
// listener that accepts and never speaks.
func TestStopBeforeStart(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)

	t.Run("already cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(errTestCancel)
		res, err := p.Run(ctx, target(s), Request{Command: "true"})
		if err != nil || res.Status != StatusCancelled {
			t.Fatalf("got %+v, %v; want status cancelled", res, err)
		}
	})

	t.Run("waiting for a session slot", func(t *testing.T) {
		tg := target(s)
		tg.Name = "one-session"
		tg.MaxSessions = 1
		dir := s.UserDir(t)
		busyCtx, stopBusy := context.WithCancelCause(context.Background())
		busy := make(chan *Result, 1)
		go func() {
			res, _ := p.Run(busyCtx, tg, Request{Command: fmt.Sprintf("echo $$ > %s/pid; sleep 1000", dir)})
			busy <- res
		}()
		sshtest.ReadPID(t, filepath.Join(dir, "pid"), 10*time.Second)
		ctx, cancel := context.WithCancelCause(context.Background())
		time.AfterFunc(200*time.Millisecond, func() { cancel(errTestCancel) })
		udir := s.UserDir(t)
		res, err := p.Run(ctx, tg, Request{Command: fmt.Sprintf("touch %s/ran", udir)})
		if err != nil || res.Status != StatusCancelled || res.RemoteStopped != nil {
			t.Fatalf("got %+v, %v; want status cancelled, nothing started", res, err)
		}
		stopBusy(errTestCancel)
		if res := <-busy; res == nil || res.Status != StatusCancelled {
			t.Errorf("busy command: got %+v; want cancelled", res)
		}
		assertPrompt(t, p, tg)
	})

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var conns []net.Conn
	var mu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		silent.Close()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	})
	mute := target(s)
	mute.Name = "mute"
	mute.Port = silent.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		name   string
		ctx    func() (context.Context, context.CancelFunc)
		req    Request
		status Status
	}{
		{"timeout", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 300*time.Millisecond)
		}, Request{Command: "true"}, StatusTimeout},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancelCause(context.Background())
			time.AfterFunc(100*time.Millisecond, func() { cancel(errTestCancel) })
			return ctx, func() { cancel(nil) }
		}, Request{Command: "true"}, StatusCancelled},
	} {
		t.Run("silent listener/"+tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			tg := *mute
			// The status says the deadline or the cancel ended the dial.
			res, err := p.Run(ctx, &tg, tc.req)
			if err != nil || res.Status != tc.status {
				t.Fatalf("got %+v, %v; want status %q", res, err, tc.status)
			}
			assertPrompt(t, p, target(s))
		})
	}
}

// TestStopRoot stops a command of a root login, for which OpenSSH refuses
// "signal" requests: the process group is killed from a second session.
func TestStopRoot(t *testing.T) {
	testenv.Root(t, "it logs in as root, for whom OpenSSH refuses signal requests")
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	tg := target(s)
	tg.User = "root"
	dir := s.UserDir(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan *Result, 1)
	go func() {
		res, err := p.Run(ctx, tg, Request{Command: fmt.Sprintf("echo $$ > %s/pid; sleep 1000", dir)})
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		done <- res
	}()
	pid := sshtest.ReadPID(t, filepath.Join(dir, "pid"), 30*time.Second)
	start := time.Now()
	cancel(errTestCancel)
	var res *Result
	select {
	case res = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return within 60s of the cancel")
	}
	t.Logf("cancel to result as root: %v", time.Since(start))
	if res == nil || res.Status != StatusCancelled || res.RemoteStopped == nil || !*res.RemoteStopped {
		t.Fatalf("got %+v; want cancelled, remote stopped", res)
	}
	if !sshtest.WaitGone(pid, 2*time.Second) {
		t.Errorf("root's process %d still runs", pid)
	}
	if !strings.Contains(s.Log(), "refusing") && !strings.Contains(s.Log(), "signal") {
		t.Logf("sshd log does not mention the refused signal:\n%s", s.Log())
	}
}
