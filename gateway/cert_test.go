package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/secrets"
	"github.com/actiongw/actiongw/sshexec"
)

// TestSSHCertificate runs the configured certificate, from a file and from
// the keyring, against a real sshd that trusts only the CA (the key is not
// in authorized_keys), and checks that actiongw check reports an expired
// certificate or one of another key without dialling.
func TestSSHCertificate(t *testing.T) {
	ca := sshtest.NewCA(t)
	s := sshtest.Start(t, sshtest.Options{TrustedUserCAKeys: ca.PublicKey})
	key, signer := sshtest.NewKey(t)
	_, stranger := sshtest.NewKey(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	cert := ca.Sign(t, signer.PublicKey(), "ci@laptop", s.User, "")
	for name, data := range map[string][]byte{
		"id-cert.pub":       cert,
		"old-cert.pub":      ca.Sign(t, signer.PublicKey(), "old", s.User, "20200101:20200102"),
		"stranger-cert.pub": ca.Sign(t, stranger.PublicKey(), "stranger", s.User, ""),
	} {
		if err := os.WriteFile(filepath.Join(home, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	target := func(name, extra string) string {
		return fmt.Sprintf("[ssh.%s]\nhost = %q\nport = %d\nuser = %q\nkey_secret = \"box-key\"\nhost_key = %q\n%s\n",
			name, s.Host, s.Port, s.User, s.Fingerprint(), extra)
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf("[server]\nstate_dir = %q\n", t.TempDir()) +
		target("file", `certificate = "~/id-cert.pub"`) + target("item", `certificate_secret = "box-cert"`) +
		target("old", `certificate = "~/old-cert.pub"`) + target("other", `certificate = "~/stranger-cert.pub"`) +
		target("plain", "")))
	if err != nil {
		t.Fatal(err)
	}
	store := secrets.Memory{"box-key": key, "box-cert": cert}
	log := slog.New(slog.DiscardHandler)

	want := map[string]func(error) bool{
		"file":  func(err error) bool { return err == nil },
		"item":  func(err error) bool { return err == nil },
		"old":   isCertError(sshexec.CertExpired),
		"other": isCertError(sshexec.CertKeyMismatch),
		// Proves the key alone is not authorized: the certificate logs in.
		"plain": func(err error) bool { var ae *sshexec.AuthError; return errors.As(err, &ae) },
	}
	for _, c := range CheckTargets(context.Background(), cfg, store, log, 30*time.Second) {
		t.Logf("%s: %v %s", c.Name, c.Err, c.Detail)
		if !want[c.Name](c.Err) {
			t.Errorf("check %s: got %v; want %s", c.Name, c.Err, map[bool]string{true: "success", false: "its error"}[c.Name == "file" || c.Name == "item"])
		}
		if c.Err != nil && strings.Contains(c.Err.Error(), strings.Fields(string(cert))[1][:40]) {
			t.Errorf("check %s: %v quotes the certificate", c.Name, c.Err)
		}
	}

	gw := New(context.Background(), Options{Config: cfg, Secrets: store, Logger: log})
	t.Cleanup(func() { gw.Close() })
	for _, name := range []string{"file", "item"} {
		// The certificate identifies its holder: no result carries it.
		r := gw.SSHExec(context.Background(), SSHExecInput{Target: name, Command: "id -un"}, nil)
		out, ok := r.Structured.(*SSHExecOutput)
		if !ok || out.Status != "exited" || out.Stdout.Head != s.User+"\n" {
			t.Errorf("ssh_exec on %s: %s; want %s", name, r.Text, s.User)
		}
		if text := structured(t, r) + r.Text; strings.Contains(text, strings.Fields(string(cert))[1][:40]) {
			t.Errorf("ssh_exec on %s: the result carries the certificate: %s", name, text)
		}
	}
}

func isCertError(p sshexec.CertProblem) func(error) bool {
	return func(err error) bool {
		var ce *sshexec.CertError
		return errors.As(err, &ce) && ce.Problem == p
	}
}
