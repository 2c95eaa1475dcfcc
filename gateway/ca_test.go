package gateway

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/secrets"
	"github.com/actiongw/actiongw/sshexec"
)

// TestGatewayCATarget runs actions through the whole pipeline on CA
// targets of a real sshd that accepts nothing but the CA's certificates:
// each action's certificate names its handle (in sshd's log) and its
// serial (in the audit intent); fan-outs and background actions work the
// same; and nothing an agent gets back holds the CA key.
func TestGatewayCATarget(t *testing.T) {
	private, public, err := sshexec.NewCA("actiongw-ca-gw")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sshtest-ca-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	principals := filepath.Join(dir, "principals")
	sshd := sshtest.Start(t, sshtest.Options{TrustedUserCAKeys: public, Config: []string{
		"AuthorizedPrincipalsFile " + principals, "Match all", "AuthorizedKeysFile none", "PasswordAuthentication no"}})
	if err := os.WriteFile(principals, []byte(sshd.User+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	target := func(name string) string {
		return fmt.Sprintf("[ssh.%s]\nhost = %q\nport = %d\nuser = %q\nca_secret = \"gw-ca\"\nknown_hosts = %q\n",
			name, sshd.Host, sshd.Port, sshd.User, sshd.KnownHosts)
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf("[server]\nstate_dir = %q\n%s%s", state, target("ca1"), target("ca2"))))
	if err != nil {
		t.Fatal(err)
	}
	gw := New(context.Background(), Options{Config: cfg, Secrets: secrets.Memory{"gw-ca": private}})
	if _, err := gw.Config(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	ctx := context.Background()
	f := &fixture{gw: gw, cfg: cfg, state: state}
	// What must never come back: the CA's private key, in any line of it.
	var leaks []string
	for _, line := range strings.Split(string(private), "\n") {
		if len(line) >= 16 && !strings.HasPrefix(line, "-----") {
			leaks = append(leaks, line)
		}
	}
	noLeak := func(t *testing.T, what, s string) {
		t.Helper()
		for _, l := range leaks {
			if strings.Contains(s, l) {
				t.Errorf("%s holds a line of the CA key", what)
			}
		}
	}
	seen := func(t *testing.T, handle string) {
		t.Helper()
		audit := readAudit(t, f)
		var serial string
		for _, line := range strings.Split(audit, "\n") {
			if strings.Contains(line, `"handle":"`+handle+`"`) && strings.Contains(line, `"kind":"intent"`) {
				if i := strings.Index(line, `"cert_serial":"`); i >= 0 {
					serial = strings.SplitN(line[i+len(`"cert_serial":"`):], `"`, 2)[0]
				}
			}
		}
		if serial == "" {
			t.Fatalf("the intent of %s records no cert_serial:\n%s", handle, audit)
		}
		want := fmt.Sprintf("ID %s (serial %s)", handle, serial)
		testenv.WaitFor(t, 10*time.Second, "sshd's log line "+want, func() bool { return strings.Contains(sshd.Log(), want) })
	}

	t.Run("ssh_exec", func(t *testing.T) {
		r := gw.SSHExec(ctx, SSHExecInput{Target: "ca1", Command: "id -un"}, nil)
		out, ok := r.Structured.(*SSHExecOutput)
		if !ok || out.Status != StatusExited || strings.TrimSpace(out.Stdout.Head) != sshd.User {
			t.Fatalf("got %s", r.Text)
		}
		seen(t, out.Handle)
		noLeak(t, "the result", r.Text+structured(t, r))
	})
	t.Run("background", func(t *testing.T) {
		zero := 0.0
		r := gw.SSHExec(ctx, SSHExecInput{Target: "ca1", Command: "sleep 0.2; echo late", WaitS: &zero}, nil)
		out := r.Structured.(*SSHExecOutput)
		wait := 30.0
		r = gw.ActionStatus(ctx, ActionStatusInput{Handle: out.Handle, WaitS: &wait}, nil)
		if !strings.Contains(structured(t, r), "late") {
			t.Fatalf("action_status: %s", r.Text)
		}
		seen(t, out.Handle)
	})
	t.Run("ssh_exec_many", func(t *testing.T) {
		r := gw.SSHExecMany(ctx, SSHExecManyInput{Targets: []string{"ca1", "ca2"}, Command: "echo many"}, nil)
		out, ok := r.Structured.(*SSHExecManyOutput)
		if !ok || len(out.Handles) != 2 || !strings.Contains(r.Text, "many") {
			t.Fatalf("got %s", r.Text)
		}
		for _, h := range out.Handles {
			seen(t, h)
		}
	})
	t.Run("hostile: the CA key does not come back", func(t *testing.T) {
		// The key is never on the host; an agent that asks for what the
		// login carries gets the certificate's public part at most.
		r := gw.SSHExec(ctx, SSHExecInput{Target: "ca1", Command: `env; cat ~/.ssh/* 2>/dev/null; echo "$SSH_ORIGINAL_COMMAND"`}, nil)
		noLeak(t, "the result", r.Text+structured(t, r))
		noLeak(t, "the audit log", readAudit(t, f))
	})
	t.Run("check", func(t *testing.T) {
		for _, c := range CheckTargets(ctx, cfg, secrets.Memory{"gw-ca": private}, nil, 30*time.Second) {
			if c.Err != nil || !strings.Contains(c.Detail, "forced to run `true`") {
				t.Errorf("check %s %s: %v, %q", c.Kind, c.Name, c.Err, c.Detail)
			}
		}
	})
}
