package sshexec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// waitOutput waits, up to a generous deadline, until buf holds want.
func waitOutput(t *testing.T, buf *syncbuf.Buffer, want string) {
	t.Helper()
	if !testenv.Eventually(30*time.Second, func() bool { return strings.Contains(buf.String(), want) }) {
		t.Fatalf("the terminal never showed %q; it showed %q", want, buf.String())
	}
}

// startTerminal starts req on tg and returns it with its output and the
// cancel of its context.
func startTerminal(t *testing.T, p *Pool, tg *Target, req TerminalRequest) (*Terminal, *syncbuf.Buffer, context.CancelCauseFunc) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(nil) })
	l, err := p.Acquire(ctx, tg, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var out syncbuf.Buffer
	req.Output = &out
	term, err := l.StartTerminal(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return term, &out, cancel
}

// ps lists the processes of the test user whose arguments hold marker,
// through a command of its own.
func ps(t *testing.T, p *Pool, tg *Target, marker string) string {
	t.Helper()
	o, err := runCmd(t, p, tg, fmt.Sprintf("ps -eo pid,args | grep -E %s | grep -v grep || true", marker))
	if err != nil {
		t.Fatal(err)
	}
	return o.stdout
}

func TestTerminal(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	s.RequirePTY(t)
	for _, sub := range []bool{true, false} {
		t.Run(fmt.Sprintf("subreaper=%v", sub), func(t *testing.T) {
			p := newPool(t)
			tg := target(s)
			tg.noSubreaper = !sub
			for _, tc := range []struct {
				name string
				end  func(*Terminal, context.CancelCauseFunc)
				want Status
			}{
				{"exit", func(term *Terminal, _ context.CancelCauseFunc) { term.Write([]byte("exit 3\n")) }, StatusExited},
				{"cancel", func(_ *Terminal, cancel context.CancelCauseFunc) { cancel(errors.New("ended by the test")) }, StatusCancelled},
			} {
				t.Run(tc.name, func(t *testing.T) {
					term, out, cancel := startTerminal(t, p, tg, TerminalRequest{Cols: 100, Rows: 30})
					if _, err := term.Write([]byte("echo hi-$((6*7)) $(stty size)\n")); err != nil {
						t.Fatal(err)
					}
					waitOutput(t, out, "hi-42 30 100")
					if strings.Contains(out.String(), "actiongw-") {
						t.Errorf("the wrapper's lines reached the terminal's output: %q", out.String())
					}
					if err := term.Resize(120, 40); err != nil {
						t.Fatal(err)
					}
					term.Write([]byte("sleep 987001 & stty size\n"))
					waitOutput(t, out, "40 120")
					tc.end(term, cancel)
					res, err := term.Wait()
					if err != nil {
						t.Fatal(err)
					}
					if res.Status != tc.want {
						t.Fatalf("status %s (%s); want %s", res.Status, res.Reason, tc.want)
					}
					if tc.want == StatusExited && (res.ExitCode == nil || *res.ExitCode != 3) {
						t.Errorf("exit code %v; want 3", res.ExitCode)
					}
					if tc.want == StatusCancelled {
						if res.RemoteStopped == nil || !*res.RemoteStopped {
							t.Errorf("remote_stopped %v (%s); want verified", res.RemoteStopped, res.Unverified)
						}
						if left := ps(t, p, tg, "987001"); left != "" {
							t.Errorf("the session's processes outlived its stop: %s", left)
						}
					}
					if _, err := term.Write([]byte("x")); err == nil {
						t.Error("a write after the end succeeded")
					}
				})
			}
		})
	}
}

// A gateway that dies (its connection closes) leaves nothing of the
// session running: the terminal hangs up. Without the supervisor (no
// perl), a job the shell put in the background, which gets no HUP, is
// left: only the shell and its foreground job end.
func TestTerminalHangUp(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	s.RequirePTY(t)
	for _, sub := range []bool{true, false} {
		t.Run(fmt.Sprintf("subreaper=%v", sub), func(t *testing.T) {
			tg := target(s)
			tg.noSubreaper = !sub
			dying := NewPool(testLogger())
			term, out, _ := startTerminal(t, dying, tg, TerminalRequest{})
			term.Write([]byte("sleep 987002 & sleep 987003; echo done\n"))
			p := newPool(t)
			deadline := time.Now().Add(30 * time.Second)
			for ps(t, p, tg, "98700[23]") == "" {
				if time.Now().After(deadline) {
					t.Fatalf("the session's sleeps never ran: %q", out.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
			dying.Close()
			if res, _ := term.Wait(); res == nil || res.Status != StatusFailed {
				t.Errorf("result %+v; want failed (connection lost)", res)
			}
			gone := "98700[23]"
			if !sub {
				gone = "987003"
				t.Cleanup(func() { runCmd(t, p, tg, "pkill -f 'sleep 987002'") })
			}
			for left := ps(t, p, tg, gone); left != ""; left = ps(t, p, tg, gone) {
				if time.Now().After(deadline) {
					t.Fatalf("the session's processes outlived its connection: %s", left)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// A server whose forced command runs instead of the wrapper (sshd's
// ForceCommand): the terminal works, its screen is not held back for
// the wrapper's line for long, and a stop cannot be verified.
func TestTerminalForceCommand(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{Config: []string{"ForceCommand /bin/sh -i"}})
	s.RequirePTY(t)
	p := newPool(t)
	tg := target(s)
	term, out, cancel := startTerminal(t, p, tg, TerminalRequest{})
	term.Write([]byte("echo forced-$((1+1))\n"))
	waitOutput(t, out, "forced-2")
	cancel(errors.New("ended by the test"))
	res, err := term.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusCancelled || res.RemoteStopped == nil || *res.RemoteStopped || res.Unverified == "" {
		t.Errorf("result %+v; want cancelled, not verified, with a reason", res)
	}
}
