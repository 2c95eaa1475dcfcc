//go:build linux

package sshexec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
)

// sudoRun runs req on tg with a 60 s safety timeout.
func sudoRun(t *testing.T, ctx context.Context, p *Pool, tg *Target, req Request) output {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	req.Stdout, req.Stderr = &stdout, &stderr
	res, err := p.Run(ctx, tg, req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return output{res, stdout.String(), stderr.String()}
}

func TestSudo(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	user, password := sshtest.EnableSudo(t)
	p := newPool(t)
	tg := target(s)
	tg.User = user
	ctx := context.Background()

	t.Run("runs as root with its environment, directory and stdin", func(t *testing.T) {
		r := sudoRun(t, ctx, p, tg, Request{Command: `id -u; pwd; printf '%s|' "$APP_V"; cat`, Sudo: true, SudoPassword: password,
			Dir: "/tmp", Env: map[string]string{"APP_V": "it's $(id)"}, Stdin: []byte("from stdin")})
		if want := "0\n/tmp\nit's $(id)|from stdin"; r.res.Status != StatusExited || r.stdout != want {
			t.Errorf("got %+v stdout %q stderr %q; want stdout %q", r.res, r.stdout, r.stderr, want)
		}
		if strings.Contains(r.stdout+r.stderr, string(password)) {
			t.Errorf("the password came back: %q %q", r.stdout, r.stderr)
		}
	})

	t.Run("the call's PATH does not choose the sudo that gets the password", func(t *testing.T) {
		// A sudo of the agent's making, found first on a PATH the call
		// sets, would run the askpass program and print the password.
		bin, err := os.MkdirTemp("", "actiongw-fake-sudo-") // not under t.TempDir's 0700 parent: the login user runs it
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(bin) })
		if err := os.Chmod(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		fake := "#!/bin/sh\necho \"FAKE:$(\"$SUDO_ASKPASS\")\"\n"
		if err := os.WriteFile(filepath.Join(bin, "sudo"), []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
		r := sudoRun(t, ctx, p, tg, Request{Command: "id -u", Sudo: true, SudoPassword: password,
			Env: map[string]string{"PATH": bin + ":/usr/sbin:/usr/bin:/sbin:/bin"}})
		if r.res.Status != StatusExited || r.stdout != "0\n" || strings.Contains(r.stdout+r.stderr, "FAKE:") {
			t.Errorf("got %+v stdout %q stderr %q; want the real sudo's root", r.res, r.stdout, r.stderr)
		}
	})

	t.Run("a wrong password is refused at once", func(t *testing.T) {
		r := sudoRun(t, ctx, p, tg, Request{Command: "id -u", Sudo: true, SudoPassword: []byte("not-the-password")})
		if r.res.Status != StatusExited || r.res.ExitCode == nil || *r.res.ExitCode == 0 || strings.Contains(r.stdout, "0\n") ||
			!strings.Contains(r.stderr, "incorrect password") {
			t.Errorf("got %+v stdout %q stderr %q; want sudo's refusal", r.res, r.stdout, r.stderr)
		}
	})

	t.Run("without a password sudo -n says one is needed", func(t *testing.T) {
		r := sudoRun(t, ctx, p, tg, Request{Command: "id -u", Sudo: true})
		if r.res.ExitCode == nil || *r.res.ExitCode == 0 || !strings.Contains(r.stderr, "password is required") {
			t.Errorf("got %+v stderr %q; want sudo -n's refusal", r.res, r.stderr)
		}
	})

	t.Run("the password is in no process's arguments or environment; a stop is verified as root", func(t *testing.T) {
		dir := t.TempDir() // root's; the command runs as root
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan output, 1)
		go func() {
			done <- sudoRun(t, cctx, p, tg, Request{Sudo: true, SudoPassword: password,
				Command: fmt.Sprintf(`sleep 1000 & echo $! > %[1]s/child; echo $$ > %[1]s/pid; trap '' TERM; wait`, dir)})
		}()
		pid := sshtest.ReadPID(t, filepath.Join(dir, "pid"), 20*time.Second)
		child := sshtest.ReadPID(t, filepath.Join(dir, "child"), 20*time.Second)
		if found := sshtest.ProcsHolding(password); len(found) > 0 {
			t.Errorf("the sudo password is visible in /proc:\n%s", strings.Join(found, "\n"))
		}
		cancel()
		r := <-done
		if r.res.Status != StatusCancelled || r.res.RemoteStopped == nil || !*r.res.RemoteStopped {
			t.Errorf("got %+v (stderr %q); want cancelled, verified stopped", r.res, r.stderr)
		}
		for _, id := range []int{pid, child} {
			if !sshtest.WaitGone(id, 5*time.Second) {
				t.Errorf("root process %d survived the stop", id)
			}
		}
	})

	t.Run("the dead-man switch stops root's processes too", func(t *testing.T) {
		px := startProxy(t, s.Addr())
		ptg := *tg
		ptg.Name, ptg.Port = "proxied", px.port()
		ptg.HostKey, ptg.KnownHostsPath = s.Fingerprint(), ""
		ptg.Keepalive = time.Second
		pp := newPool(t)
		dir := t.TempDir()
		done := make(chan output, 1)
		go func() {
			done <- sudoRun(t, ctx, pp, &ptg, Request{Sudo: true, SudoPassword: password,
				Command: fmt.Sprintf(`trap '' TERM; sleep 1000 & echo $! > %[1]s/child; echo $$ > %[1]s/pid; wait`, dir)})
		}()
		pid := sshtest.ReadPID(t, filepath.Join(dir, "pid"), 20*time.Second)
		child := sshtest.ReadPID(t, filepath.Join(dir, "child"), 20*time.Second)
		px.kill() // the client is gone: only the remote switch can stop them
		<-done
		for _, id := range []int{pid, child} {
			if !sshtest.WaitGone(id, 30*time.Second) {
				t.Errorf("root process %d still runs after the client was lost", id)
			}
		}
	})

	t.Run("refused on a pseudo-terminal", func(t *testing.T) {
		pty := *tg
		pty.UsePTY = true
		_, err := p.Run(ctx, &pty, Request{Command: "id -u", Sudo: true, SudoPassword: password})
		var ce *CommandError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "echo the password") {
			t.Errorf("got %v; want a *CommandError before it ran", err)
		}
	})
}
