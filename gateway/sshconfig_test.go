package gateway

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/secrets"
	"github.com/actiongw/actiongw/sshexec"
)

// checkOne parses the actiongw config text, with $SSHCONFIG and
// $KNOWNHOSTS replaced, and checks target name against the real sshd as
// `actiongw check` does.
func checkOne(t *testing.T, s *sshtest.Server, sshCfg, knownHosts, text, name string) (*config.Config, error) {
	t.Helper()
	dir := t.TempDir()
	sshPath := filepath.Join(dir, "ssh_config")
	if err := os.WriteFile(sshPath, []byte(sshCfg), 0o600); err != nil {
		t.Fatal(err)
	}
	text = strings.NewReplacer("$SSHCONFIG", sshPath, "$KNOWNHOSTS", knownHosts).Replace(text)
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	store := secrets.Memory{"box-key": s.ClientKey}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range CheckTargets(t.Context(), cfg, store, log, 2*time.Minute) {
		if c.Name == name {
			return cfg, c.Err
		}
	}
	t.Fatalf("no check of target %q", name)
	return nil, nil
}

// The ssh config's aliases, ProxyJump and HostKeyAlias against a real
// sshd: the target names only the alias; the login is the keyring key's.
func TestSSHConfigAgainstSSHD(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	aliasKnownHosts := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(aliasKnownHosts, []byte(knownhosts.Line([]string{"judgebox-key"}, s.HostKeys[0])+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sshCfg := fmt.Sprintf(`Host myalias
  HostName 127.0.0.1
  Port %[1]d
  User %[2]s
Host viajump
  HostName 127.0.0.1
  Port %[1]d
  User %[2]s
  ProxyJump myalias,%[2]s@127.0.0.1:%[1]d
Host keyalias
  HostName 127.0.0.1
  Port %[1]d
  User %[2]s
  HostKeyAlias judgebox-key
Host jumpkeyalias
  HostName 127.0.0.1
  Port %[1]d
  User %[2]s
  HostKeyAlias judgebox-key
  ProxyJump keyalias
`, s.Port, s.User)
	const target = "[server]\nssh_config = \"$SSHCONFIG\"\n[ssh.box]\nhost = %q\nkey_secret = \"box-key\"\nknown_hosts = \"$KNOWNHOSTS\"\n"
	cases := []struct {
		name, alias, knownHosts string
		hops                    int
		wantErr                 string // "" for a login
	}{
		{"alias", "myalias", s.KnownHosts, 0, ""},
		{"ProxyJump through the same sshd, twice", "viajump", s.KnownHosts, 2, ""},
		{"HostKeyAlias: known_hosts records the alias only", "keyalias", aliasKnownHosts, 0, ""},
		{"HostKeyAlias: host:port is not looked up", "keyalias", s.KnownHosts, 0, `"judgebox-key ssh-ed25519 `},
		{"no HostKeyAlias: the alias line does not count", "myalias", aliasKnownHosts, 0, "is unknown"},
		{"a hop's host key is checked", "viajump", aliasKnownHosts, 2, `target "box (jump host myalias)" is unknown`},
		{"a hop's HostKeyAlias", "jumpkeyalias", aliasKnownHosts, 1, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := strings.Count(s.Log(), "Accepted publickey")
			cfg, err := checkOne(t, s, sshCfg, c.knownHosts, fmt.Sprintf(target, c.alias), "box")
			// Each hop and the target log in once: the chain was dialled.
			// sshd's log arrives through a pipe, after the login.
			if c.wantErr == "" {
				testenv.WaitFor(t, time.Minute, fmt.Sprintf("%d logins in the sshd log", c.hops+1), func() bool {
					return strings.Count(s.Log(), "Accepted publickey")-before == c.hops+1
				})
			}
			if got := len(cfg.SSH["box"].ProxyJump); got != c.hops {
				t.Errorf("hops: got %d; want %d", got, c.hops)
			}
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("got %v; want a login", err)
			case c.wantErr != "":
				var hk *sshexec.HostKeyError
				if !errors.As(err, &hk) || !strings.Contains(err.Error(), c.wantErr) {
					t.Errorf("got %v; want a *sshexec.HostKeyError containing %q", err, c.wantErr)
				}
			}
		})
	}
}

// ConnectTimeout bounds a dial to a host that accepts TCP and never
// speaks; the check's own timeout is far longer.
func TestSSHConfigConnectTimeout(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	sshCfg := fmt.Sprintf("Host mute\n  HostName 127.0.0.1\n  Port %d\n  ConnectTimeout 1\n", l.Addr().(*net.TCPAddr).Port)
	_, err = checkOne(t, s, sshCfg, s.KnownHosts,
		"[server]\nssh_config = \"$SSHCONFIG\"\n[ssh.box]\nhost = \"mute\"\nuser = \"u\"\nkey_secret = \"box-key\"\n", "box")
	if err == nil || !strings.Contains(err.Error(), "no connection within its ConnectTimeout (1s)") {
		t.Errorf("got %v; want the ConnectTimeout error", err)
	}
}

// IdentityAgent names the agent socket of a target with agent = true,
// in place of $SSH_AUTH_SOCK.
func TestSSHConfigIdentityAgent(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	key, err := ssh.ParseRawPrivateKey(s.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: key}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer l.Close()
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { defer c.Close(); agent.ServeAgent(keyring, c) })
		}
	})
	t.Setenv("SSH_AUTH_SOCK", filepath.Join(t.TempDir(), "not-an-agent"))
	sshCfg := fmt.Sprintf("Host agented\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityAgent %s\n", s.Port, s.User, sock)
	if _, err := checkOne(t, s, sshCfg, s.KnownHosts,
		"[server]\nssh_config = \"$SSHCONFIG\"\n[ssh.box]\nhost = \"agented\"\nagent = true\nknown_hosts = \"$KNOWNHOSTS\"\n", "box"); err != nil {
		t.Errorf("got %v; want a login with the IdentityAgent's key", err)
	}
}
