//go:build linux

package sshexec

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
)

// TestHostileSudo: what an agent that may run plain commands on a target
// with sudo (but not any command as the login user, which could read the
// password: docs/ssh.md) can learn of the password or reuse of sudo's grant.
func TestHostileSudo(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	user, password := sshtest.EnableSudo(t)
	p := newPool(t)
	tg := target(s)
	tg.User = user
	ctx := context.Background()

	t.Run("a concurrent ps does not show the password's length", func(t *testing.T) {
		// The wrapper is the login shell's argument while the command
		// runs: every process on the host can read it. A wrapper that
		// reads the password with "head -c LEN" told its length.
		dir := t.TempDir()
		done := make(chan output, 1)
		go func() {
			done <- sudoRun(t, ctx, p, tg, Request{Sudo: true, SudoPassword: password,
				Command: fmt.Sprintf(`echo $$ > %[1]s/pid; while [ ! -e %[1]s/go ]; do sleep 0.05; done`, dir)})
		}()
		sshtest.ReadPID(t, filepath.Join(dir, "pid"), 20*time.Second)
		ps := sudoRun(t, ctx, p, tg, Request{Command: "ps -e -ww -o args"})
		if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if r := <-done; r.res.Status != StatusExited || r.res.ExitCode == nil || *r.res.ExitCode != 0 {
			t.Fatalf("the sudo run: %+v stderr %q", r.res, r.stderr)
		}
		if !strings.Contains(ps.stdout, "__agw_sudo") {
			t.Fatalf("ps did not show the running wrapper, so it proves nothing:\n%s", ps.stdout)
		}
		if length := fmt.Sprintf("head -c %d", len(password)); strings.Contains(ps.stdout, length) {
			t.Errorf("ps shows %q: the sudo password's length", length)
		}
	})

	t.Run("a plain command cannot reuse the grant of a sudo run", func(t *testing.T) {
		if r := sudoRun(t, ctx, p, tg, Request{Command: "id -u", Sudo: true, SudoPassword: password}); r.stdout != "0\n" {
			t.Fatalf("the sudo run: %+v stdout %q stderr %q", r.res, r.stdout, r.stderr)
		}
		r := sudoRun(t, ctx, p, tg, Request{Command: "sudo -n id -u"})
		if r.res.ExitCode == nil || *r.res.ExitCode == 0 || strings.Contains(r.stdout, "0\n") {
			t.Errorf("sudo -n in a plain command after a sudo run: %+v stdout %q stderr %q; want refused", r.res, r.stdout, r.stderr)
		}
	})
}
