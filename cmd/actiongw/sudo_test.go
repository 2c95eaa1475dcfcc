//go:build linux

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/testkit/sshtest"
)

// TestServeSudo: through serve, a command runs as root with the sudo
// password from the keyring, which no process on the target shows and no
// result, log or file holds; a target without allow_sudo denies it; a
// wrong password is said plainly.
func TestServeSudo(t *testing.T) {
	user, password := sshtest.EnableSudo(t)
	s := startServedWith(t, servedOptions{tables: sudoTarget("root", user, "sudo-pw", "") + sudoTarget("wrongpw", user, "sudo-wrong", "")})
	ctx := context.Background()
	s.setSecret(t, "sudo-pw", password)
	s.setSecret(t, "sudo-wrong", []byte("wrong-password-1"))
	// Loaded by the next call that needs them.
	r := until(t, s.client, "the sudo secret to load", "ssh_exec", map[string]any{"target": "root", "command": "id -u", "sudo": true},
		func(r *mcp.CallToolResult) bool { return !strings.Contains(resultText(r), "not in the keyring") })
	if out := decode[gateway.SSHExecOutput](t, r); out.Stdout.Head != "0\n" {
		t.Fatalf("sudo id -u: %s", resultText(r))
	}

	// While a sudo command runs, no process on the target shows the password.
	dir := t.TempDir()
	p, err := s.client.StartTool(ctx, "ssh_exec", map[string]any{"target": "root", "sudo": true,
		"command": fmt.Sprintf("echo $$ > %s/pid; exec sleep 60", dir)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := waitPID(t, filepath.Join(dir, "pid"))
	if found := sshtest.ProcsHolding(password); len(found) > 0 {
		t.Errorf("the sudo password is visible in /proc:\n%s", strings.Join(found, "\n"))
	}
	s.client.Cancel(p.ID(), "test")
	if !sshtest.WaitGone(pid, 10*time.Second) {
		t.Errorf("root process %d survived the cancel", pid)
	}

	r = s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "id -u", "sudo": true})
	if text := resultText(r); !r.IsError || !strings.Contains(text, "allow_sudo") {
		t.Errorf("sudo on a target without allow_sudo: %s", text)
	}
	r = s.call(t, "ssh_exec", map[string]any{"target": "wrongpw", "command": "id -u", "sudo": true})
	if text := resultText(r); !r.IsError || !strings.Contains(text, "sudo refused the password") || !strings.Contains(text, "actiongw secret set sudo-wrong") {
		t.Errorf("a wrong sudo password: %s", text)
	}
	s.client.Close()
	s.assertNoSecretIn(t, string(password))
}

// sudoTarget is the table of an SSH target name on the test sshd that
// logs in as user and may use sudo with the keyring item secret, then
// extra lines.
func sudoTarget(name, user, secret, extra string) string {
	return fmt.Sprintf("[ssh.%s]\nhost = \"127.0.0.1\"\nport = @PORT@\nuser = %q\nkey_secret = \"box-key\"\nknown_hosts = \"@KNOWN_HOSTS@\"\nallow_sudo = true\nsudo_secret = %q\n%s\n",
		name, user, secret, extra)
}

// setSecret stores v under name in serve's keyring until the test ends.
func (s *served) setSecret(t *testing.T, name string, v []byte) {
	t.Helper()
	if err := s.keyring.Set(context.Background(), name, v); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.keyring.Delete(context.Background(), name) })
}
