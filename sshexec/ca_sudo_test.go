//go:build linux

package sshexec

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// TestCASudo runs a command as root under sudo on a CA target, and stops
// one: the password goes on stdin as on any target, and the control
// scripts that stop and verify it run under sudo on certificates of their
// own.
func TestCASudo(t *testing.T) {
	cs := startCAServer(t)
	user, password := sshtest.EnableSudo(t)
	cs.allow(t, user)
	p := newPool(t)
	tg := cs.target()
	tg.User = user
	out, err := runCA(t, p, tg, "act-sudo", NewSerial(), Request{Command: "id -u", Sudo: true, SudoPassword: password})
	if err != nil || out.res.Status != StatusExited || out.stdout != "0\n" {
		t.Fatalf("got %+v, %v; want 0", out, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := p.Acquire(ctx, tg, forever)
	if err != nil {
		t.Fatal(err)
	}
	l.Certify("act-sudo-stop", NewSerial())
	rctx, rcancel := context.WithCancelCause(ctx)
	var stdout syncbuf.Buffer
	done := make(chan *Result, 1)
	go func() {
		res, _ := l.Run(rctx, Request{Command: "echo started; sleep 600", Sudo: true, SudoPassword: password, Stdout: &stdout})
		done <- res
	}()
	testenv.WaitFor(t, 30*time.Second, "the command to start", func() bool { return strings.Contains(stdout.String(), "started") })
	rcancel(context.Canceled)
	res := <-done
	if res.Status != StatusCancelled || res.RemoteStopped == nil || !*res.RemoteStopped {
		t.Fatalf("got %+v; want cancelled and verified stopped", res)
	}
}
