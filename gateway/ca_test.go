package gateway

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/secrets"
	"github.com/actiongw/actiongw/sshexec"
)

// startCASSHD starts a real sshd that trusts a new CA and accepts
// nothing but its certificates for the login user; it returns the CA's
// private key (for the keyring item "gw-ca").
func startCASSHD(t *testing.T) (*sshtest.Server, []byte) {
	t.Helper()
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
	return sshd, private
}

// caGateway is a gateway with state dir state and the SSH target
// tables, its keyring holding the CA key private as "gw-ca".
func caGateway(t *testing.T, state string, private []byte, tables string) *fixture {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf("[server]\nstate_dir = %q\n%s", state, tables)))
	if err != nil {
		t.Fatal(err)
	}
	gw := New(context.Background(), Options{Config: cfg, Secrets: secrets.Memory{"gw-ca": private}})
	if _, err := gw.Config(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return &fixture{gw: gw, cfg: cfg, state: state}
}

// TestGatewayCATarget runs actions through the whole pipeline on CA
// targets of a real sshd that accepts nothing but the CA's certificates:
// each action's certificate names its handle (in sshd's log) and its
// serial (in the audit intent); fan-outs and background actions work the
// same; and nothing an agent gets back holds the CA key.
func TestGatewayCATarget(t *testing.T) {
	sshd, private := startCASSHD(t)
	state := t.TempDir()
	target := func(name string) string {
		return fmt.Sprintf("[ssh.%s]\nhost = %q\nport = %d\nuser = %q\nca_secret = \"gw-ca\"\nknown_hosts = %q\n",
			name, sshd.Host, sshd.Port, sshd.User, sshd.KnownHosts)
	}
	f := caGateway(t, state, private, target("ca1")+target("ca2"))
	gw, cfg := f.gw, f.cfg
	ctx := context.Background()
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

// TestGatewayCAHostKeyAsk: a CA target with host_key_policy = "ask" and a
// host key its known_hosts lacks asks the person before the action's
// intent (its certificate, signed for the command, comes after): approved,
// the key is recorded and the command runs; declined, nothing runs; a
// changed key is refused, never asked about.
func TestGatewayCAHostKeyAsk(t *testing.T) {
	sshd, private := startCASSHD(t)
	state, dir := t.TempDir(), t.TempDir()
	other, _, _, _, err := ssh.ParseAuthorizedKey([]byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl x"))
	if err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(dir, "changed")
	if err := os.WriteFile(changed, []byte(knownhosts.Line([]string{knownhosts.Normalize(sshd.Addr())}, other)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	target := func(name, knownHosts string) string {
		return fmt.Sprintf("[ssh.%s]\nhost = %q\nport = %d\nuser = %q\nca_secret = \"gw-ca\"\nknown_hosts = %q\nhost_key_policy = \"ask\"\n",
			name, sshd.Host, sshd.Port, sshd.User, knownHosts)
	}
	fresh, declined := filepath.Join(dir, "fresh"), filepath.Join(dir, "declined")
	f := caGateway(t, state, private, target("fresh", fresh)+target("declined", declined)+target("changed", changed))
	gw := f.gw
	marker := filepath.Join(sshd.UserDir(t), "ran")
	var asked []string
	person := approverFunc(func(_ context.Context, q *Question) (Answer, time.Duration, error) {
		asked = append(asked, q.Target)
		// Asked before the intent: the audit log has no action of the
		// target allowed yet.
		for _, line := range strings.Split(readAudit(t, f), "\n") {
			if strings.Contains(line, `"kind":"intent"`) && strings.Contains(line, `"target":"`+q.Target+`"`) && strings.Contains(line, `"decision":"allow"`) {
				t.Errorf("an intent was written before the host key question: %s", line)
			}
		}
		if q.Asked != AskedHostKey {
			t.Errorf("asked %q; want the host key", q.Asked)
		}
		if q.Target == "fresh" {
			return AnswerApprove, 0, nil
		}
		return AnswerDecline, 0, nil
	})
	ctx := WithApprover(context.Background(), person)

	r := gw.SSHExec(ctx, SSHExecInput{Target: "declined", Command: "touch " + marker}, nil)
	if !r.IsError || !strings.Contains(r.Text, "host_key_policy") {
		t.Errorf("declined key: %s", r.Text)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran on a host whose key the person declined")
	}
	if _, err := os.Stat(declined); err == nil {
		t.Error("a declined key was written to known_hosts")
	}

	r = gw.SSHExec(ctx, SSHExecInput{Target: "fresh", Command: "touch " + marker}, nil)
	if out, ok := r.Structured.(*SSHExecOutput); !ok || out.Status != StatusExited {
		t.Fatalf("approved key: %s", r.Text)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the command did not run after the key was approved: %v", err)
	}
	if b, err := os.ReadFile(fresh); err != nil || !strings.Contains(string(b), "ssh-") {
		t.Errorf("known_hosts after the approval: %q, %v; want the host's key", b, err)
	}
	r = gw.SSHExec(ctx, SSHExecInput{Target: "fresh", Command: "true"}, nil)
	if r.IsError {
		t.Errorf("second call: %s", r.Text)
	}

	r = gw.SSHExec(ctx, SSHExecInput{Target: "changed", Command: "echo changed"}, nil)
	if !r.IsError || !strings.Contains(r.Text, "changed") || strings.Contains(r.Text, "\nchanged\n") {
		t.Errorf("changed key: %s", r.Text)
	}
	if want := []string{"declined", "fresh"}; !slices.Equal(asked, want) {
		t.Errorf("asked about %q; want %q (the trusted key not again, the changed one never)", asked, want)
	}
}

// TestGatewayCACheckRefused: what `actiongw check` reports for a CA
// target whose CA the host does not trust: the line to add, the
// principal and the sshd version the host announced, and no line of the
// CA's private key.
func TestGatewayCACheckRefused(t *testing.T) {
	sshd, _ := startCASSHD(t)
	private, public, err := sshexec.NewCA("untrusted")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf("[server]\nstate_dir = %q\n[ssh.ca]\nhost = %q\nport = %d\nuser = %q\nca_secret = \"other-ca\"\nknown_hosts = %q\n",
		t.TempDir(), sshd.Host, sshd.Port, sshd.User, sshd.KnownHosts)))
	if err != nil {
		t.Fatal(err)
	}
	checks := CheckTargets(context.Background(), cfg, secrets.Memory{"other-ca": private}, nil, 30*time.Second)
	if len(checks) != 1 || checks[0].Err == nil {
		t.Fatalf("got %+v; want the CA target's check refused", checks)
	}
	msg := checks[0].Err.Error()
	fields := strings.Fields(string(public))
	for _, want := range []string{"TrustedUserCAKeys", fields[0] + " " + fields[1], fmt.Sprintf("must list %q", sshd.User), `announced "SSH-2.0-OpenSSH_`} {
		if !strings.Contains(msg, want) {
			t.Errorf("check: %s; want it to contain %s", msg, want)
		}
	}
	for _, line := range strings.Split(string(private), "\n") {
		if len(line) > 16 && !strings.HasPrefix(line, "-----") && strings.Contains(msg, line) {
			t.Error("check's error holds a line of the CA's private key")
		}
	}
}
