package sshexec

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/sshtest"
	"github.com/actiongw/actiongw/internal/testenv"
)

func TestAuth(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	passphrase := []byte("correct horse")
	encrypted := sshtest.EncryptKey(t, s.ClientKey, passphrase)
	strangerKey, _ := sshtest.NewKey(t)
	agentSock := startAgent(t, s.ClientKey)

	for _, tc := range []struct {
		name  string
		user  string
		auth  Auth
		agent string // SSH_AUTH_SOCK
		// check is nil for a successful login.
		check func(error) bool
	}{
		{name: "key", auth: Auth{PrivateKey: s.ClientKey}},
		{name: "encrypted key", auth: Auth{PrivateKey: encrypted, Passphrase: passphrase}},
		{name: "password", user: sshtest.PasswordUser}, // its password is set below
		{name: "agent", auth: Auth{Agent: true}, agent: agentSock},
		{name: "wrong key", auth: Auth{PrivateKey: strangerKey}, check: isAuthError},
		{name: "wrong password", user: sshtest.PasswordUser, auth: Auth{Password: []byte("not-it")}, check: isAuthError},
		{name: "missing secret", auth: Auth{}, check: func(err error) bool { return errors.Is(err, ErrNoCredential) }},
		{name: "missing passphrase", auth: Auth{PrivateKey: encrypted}, check: contains("no passphrase")},
		{name: "wrong passphrase", auth: Auth{PrivateKey: encrypted, Passphrase: []byte("wr0ng-phrase")}, check: contains("passphrase does not decrypt")},
		{name: "garbage key", auth: Auth{PrivateKey: []byte("not a key")}, check: contains("parse private key")},
		{name: "agent without socket", auth: Auth{Agent: true}, check: contains("SSH_AUTH_SOCK")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SSH_AUTH_SOCK", tc.agent)
			tg := target(s)
			tg.Name, tg.Auth = tc.name, tc.auth
			if tc.user == sshtest.PasswordUser {
				password := sshtest.SetPassword(t) // needs root
				if tc.name == "password" {
					tg.Auth.Password = password
				}
			}
			if tc.user != "" {
				tg.User = tc.user
			}
			out, err := runCmd(t, p, tg, "id -un")
			if tc.check == nil {
				if err != nil || strings.TrimSpace(out.stdout) != tg.User {
					t.Fatalf("got %q, %v; want login as %s", out.stdout, err, tg.User)
				}
				return
			}
			if err == nil || !tc.check(err) {
				t.Fatalf("got %v; want the %s error", err, tc.name)
			}
			for _, secret := range [][]byte{tc.auth.PrivateKey, tc.auth.Passphrase, tc.auth.Password} {
				if len(secret) > 0 && strings.Contains(err.Error(), string(secret)) {
					t.Errorf("error %q contains a credential", err)
				}
			}
			if text := fmt.Sprintf("%v %+v %#v", tg, tg, tg); strings.Contains(text, "BEGIN") ||
				(len(tc.auth.Password) > 0 && strings.Contains(text, string(tc.auth.Password))) {
				t.Errorf("formatting the target shows a credential: %s", text)
			}
		})
	}
}

func isAuthError(err error) bool {
	var ae *AuthError
	return errors.As(err, &ae)
}

func contains(s string) func(error) bool {
	return func(err error) bool { return strings.Contains(err.Error(), s) }
}

// startAgent runs a real ssh-agent holding key and returns its socket.
func startAgent(t *testing.T, key []byte) string {
	t.Helper()
	testenv.Command(t, "ssh-agent", "openssh-client")
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	agent := exec.Command("ssh-agent", "-D", "-a", sock)
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	keyPath := filepath.Join(dir, "id")
	if err := os.WriteFile(keyPath, key, 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "ssh-agent to listen", func() bool {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	add := exec.Command("ssh-add", keyPath)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v: %s", err, out)
	}
	return sock
}
