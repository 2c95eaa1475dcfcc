//go:build linux

package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/secrets"
)

// TestCAInit makes a CA with the real binary and a real Secret Service:
// the key goes to the keyring and only its public line to stdout, and a
// second init never replaces it.
func TestCAInit(t *testing.T) {
	testenv.SecretService(t)
	service := "actiongw-test-" + randomHex(t, 6)
	kr := &secrets.Keyring{Service: service}
	ctx := context.Background()
	t.Cleanup(func() { kr.Delete(ctx, "ops-ca") })
	run := func() (string, int) {
		cmd := exec.Command(actiongwBinary(t), "ca", "init", "ops-ca")
		cmd.Env = append(os.Environ(), "ACTIONGW_KEYRING_SERVICE="+service)
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	out, code := run()
	if code != 0 {
		t.Fatalf("ca init: exit %d\n%s", code, out)
	}
	v, err := kr.Get(ctx, "ops-ca")
	if err != nil {
		t.Fatal(err)
	}
	ca, err := ssh.ParsePrivateKey(v.Reveal())
	if err != nil {
		t.Fatalf("the keyring item is no private key: %v", err)
	}
	line := strings.TrimSuffix(string(ssh.MarshalAuthorizedKey(ca.PublicKey())), "\n") + " actiongw-ca-ops-ca"
	for _, want := range []string{line, "TrustedUserCAKeys", "AuthorizedPrincipalsFile", `ca_secret = "ops-ca"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(string(v.Reveal()), "\n") {
		if len(l) > 16 && strings.Contains(out, l) {
			t.Errorf("ca init printed a line of the private key")
		}
	}
	out, code = run()
	if code != 1 || !strings.Contains(out, "already holds an item") {
		t.Errorf("second ca init: exit %d\n%s; want it refused", code, out)
	}
	if v2, err := kr.Get(ctx, "ops-ca"); err != nil || string(v2.Reveal()) != string(v.Reveal()) {
		t.Errorf("the second init changed the CA key")
	}
}
