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

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

func TestAuth(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	passphrase := []byte("correct horse")
	encrypted := sshtest.EncryptKey(t, s.ClientKey, passphrase)
	strangerKey, _ := sshtest.NewKey(t)
	agentSock := startAgent(t, s.ClientKey)
	emptyAgent := startAgent(t, nil)
	strangerAgent := startAgent(t, strangerKey)
	strangerPub, err := os.ReadFile(filepath.Join(filepath.Dir(strangerAgent), "id.pub"))
	if err != nil {
		t.Fatal(err)
	}
	token := []byte("ghp_0123456789abcdefghijklmnopqrstuvwxyz") // what a person stores by mistake

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
		{name: "wrong key", auth: Auth{PrivateKey: strangerKey, KeySecret: "box-key"},
			check: all(isAuthError, contains(`key SHA256:`), contains(`keyring item "box-key"`), contains("authorized_keys"))},
		{name: "wrong password", user: sshtest.PasswordUser, auth: Auth{Password: []byte("not-it"), PasswordSecret: "box-pw"},
			check: all(isAuthError, contains(`keyring item "box-pw"`), contains("actiongw secret set box-pw"))},
		{name: "missing secret", auth: Auth{}, check: func(err error) bool { return errors.Is(err, ErrNoCredential) }},
		{name: "missing passphrase", auth: Auth{PrivateKey: encrypted, KeySecret: "box-key"},
			check: all(isKeyError(KeyNeedsPassphrase), contains(`keyring item "box-key"`), contains("encrypted"), contains("passphrase_secret"), contains("actiongw secret set box-key-passphrase"))},
		{name: "wrong passphrase", auth: Auth{PrivateKey: encrypted, Passphrase: []byte("wr0ng-phrase"), KeySecret: "box-key", PassphraseSecret: "box-pass"},
			check: all(isKeyError(KeyWrongPassphrase), contains(`keyring item "box-pass" (passphrase_secret) does not decrypt`), contains("actiongw secret set box-pass"))},
		{name: "token stored as the key", auth: Auth{PrivateKey: token, KeySecret: "box-key"},
			check: all(isKeyError(KeyNotAKey), contains(`keyring item "box-key" (key_secret) is not an OpenSSH or PEM private key`), contains("actiongw secret set box-key < ~/.ssh/id_ed25519"))},
		{name: "public key stored as the key", auth: Auth{PrivateKey: strangerPub, KeySecret: "box-key"},
			check: all(isKeyError(KeyNotAKey), contains("holds a public key"), contains("actiongw secret set box-key <"))},
		{name: "agent without socket", auth: Auth{Agent: true}, check: all(contains("SSH_AUTH_SOCK is not set"), contains("ssh-add"))},
		{name: "agent socket gone", auth: Auth{Agent: true}, agent: filepath.Join(t.TempDir(), "gone.sock"),
			check: all(contains("cannot reach the ssh-agent at SSH_AUTH_SOCK="), contains("gone.sock"), contains("not running"))},
		{name: "agent without keys", auth: Auth{Agent: true}, agent: emptyAgent,
			check: all(isAuthError, contains("holds no keys"), contains("SSH_AUTH_SOCK="+emptyAgent), contains("ssh-add"), not(contains("authorized_keys")))},
		{name: "agent with a refused key", auth: Auth{Agent: true}, agent: strangerAgent,
			check: all(isAuthError, contains("1 key from the ssh-agent"), contains("authorized_keys"))},
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
			t.Log(err)
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

func isKeyError(p KeyProblem) func(error) bool {
	return func(err error) bool {
		var ke *KeyError
		return errors.As(err, &ke) && ke.Problem == p
	}
}

func all(checks ...func(error) bool) func(error) bool {
	return func(err error) bool {
		for _, c := range checks {
			if !c(err) {
				return false
			}
		}
		return true
	}
}

func not(check func(error) bool) func(error) bool {
	return func(err error) bool { return !check(err) }
}

func contains(s string) func(error) bool {
	return func(err error) bool { return strings.Contains(err.Error(), s) }
}

// startAgent runs a real ssh-agent holding key (nil: none) and returns its
// socket. The key's public half is written next to the socket as id.pub.
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
	if key == nil {
		return sock
	}
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
	pub, err := exec.Command("ssh-keygen", "-y", "-f", keyPath).Output()
	if err != nil {
		t.Fatalf("ssh-keygen -y: %v", err)
	}
	if err := os.WriteFile(keyPath+".pub", pub, 0o600); err != nil {
		t.Fatal(err)
	}
	return sock
}

// TestValidateParsesKeys checks that Validate finds an unusable key without
// dialling: the target's own and its jump host's.
func TestValidateParsesKeys(t *testing.T) {
	good, _ := sshtest.NewKey(t)
	base := func(name string, key []byte) *Target {
		return &Target{Name: name, Host: "192.0.2.1", User: "u", MaxSessions: 1, Keepalive: time.Second,
			Auth: Auth{PrivateKey: key, KeySecret: name + "-key"}}
	}
	bad := []byte("not a key at all, a token")
	for _, tc := range []struct {
		name   string
		target *Target
		want   string // "" for no error
	}{
		{"good key", base("a", good), ""},
		{"token as key", base("b", bad), `target "b": keyring item "b-key" (key_secret) is not an OpenSSH or PEM private key`},
		{"jump host's key", func() *Target { t := base("c", good); t.Jump = base("bastion", bad); return t }(),
			`target "bastion": keyring item "bastion-key"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.target.Validate()
			var ke *KeyError
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate() = %v; want nil", err)
			case tc.want != "" && (!errors.As(err, &ke) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate() = %v; want a *KeyError containing %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), string(bad)):
				t.Fatalf("Validate() = %v; it repeats the secret", err)
			}
		})
	}
}
