package sshtest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// login runs command as user with the OpenSSH client, as a user of the
// harness would, with a strict host key check.
func login(t *testing.T, s *Server, user, command string) (string, error) {
	t.Helper()
	sshClient := testenv.Command(t, "ssh", "openssh-client")
	key := filepath.Join(t.TempDir(), "id")
	if err := os.WriteFile(key, s.ClientKey, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sshClient, "-F", "/dev/null", "-i", key, "-p", strconv.Itoa(s.Port),
		"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
		"-o", "UserKnownHostsFile="+s.KnownHosts, "-o", "HostKeyAlgorithms=ssh-ed25519",
		user+"@"+s.Host, command).CombinedOutput()
	return string(out), err
}

// TestServerLogin checks the account sshd logs in, and root where sshd
// runs as root.
func TestServerLogin(t *testing.T) {
	s := Start(t, Options{})
	users := []string{s.User}
	if os.Geteuid() == 0 && s.User != "root" {
		users = append(users, "root")
	}
	for _, u := range users {
		out, err := login(t, s, u, "id -un")
		if err != nil {
			t.Fatalf("ssh as %s: %v: %s\n%s", u, err, out, s.Log())
		}
		if got := strings.TrimSpace(out); got != u {
			t.Errorf("id -un as %s: got %q; want %q", u, got, u)
		}
	}
}

// TestUserDir: the login user can write in UserDir.
func TestUserDir(t *testing.T) {
	s := Start(t, Options{})
	dir := s.UserDir(t)
	if out, err := login(t, s, s.User, "echo $$ > "+dir+"/pid"); err != nil {
		t.Fatalf("ssh: %v: %s", err, out)
	}
	ReadPID(t, filepath.Join(dir, "pid"), 10*time.Second)
}

// TestPTY: Server.PTY says truly whether sshd gives a session a terminal.
func TestPTY(t *testing.T) {
	s := Start(t, Options{})
	c := dial(t, s)
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	err = sess.RequestPty("xterm", 24, 80, ssh.TerminalModes{})
	if err == nil {
		var out []byte
		out, err = sess.Output("tty")
		if err == nil && !strings.HasPrefix(string(out), "/dev/") {
			t.Errorf("tty printed %q; want a terminal device", out)
		}
	}
	if got := err == nil; got != s.PTY {
		t.Errorf("terminal session works %v (%v); Server.PTY says %v (login user %s)", got, err, s.PTY, s.User)
	}
}

// dial logs in to s as its user with golang.org/x/crypto/ssh.
func dial(t *testing.T, s *Server) *ssh.Client {
	t.Helper()
	signer, err := ssh.ParsePrivateKey(s.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	hostKeys, err := knownhosts.New(s.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ssh.Dial("tcp", s.Addr(), &ssh.ClientConfig{User: s.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: hostKeys, HostKeyAlgorithms: []string{ssh.KeyAlgoED25519}, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSignals: Server.Signals says truly whether a "signal" request
// reaches the command.
func TestSignals(t *testing.T) {
	s := Start(t, Options{})
	sess, err := dial(t, s).NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	out, err := sess.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Start("echo $$; exec sleep 60"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		t.Fatalf("got %q, %v; want a pid", line, err)
	}
	ok, err := sess.SendRequest("signal", true, ssh.Marshal(&struct{ Signal string }{"KILL"}))
	if err != nil {
		t.Fatal(err)
	}
	if ok != s.Signals {
		t.Errorf("signal request accepted %v; Server.Signals says %v (login user %s)", ok, s.Signals, s.User)
	}
	if !ok {
		kill(pid) // nothing else ends it
	}
	if !WaitGone(pid, 30*time.Second) {
		t.Errorf("process %d still runs (signal request accepted: %v)", pid, ok)
	}
}

// TestServerUser: with Options.User, sshd logs in that account.
func TestServerUser(t *testing.T) {
	testenv.Root(t, "only a root sshd logs in an account other than its own")
	const own = "actiongw-sshtest-own"
	EnsureUser(t, own)
	s := Start(t, Options{User: own})
	if s.User != own {
		t.Errorf("User: got %q; want %q", s.User, own)
	}
	out, err := login(t, s, s.User, "id -un")
	if err != nil {
		t.Fatalf("ssh: %v: %s", err, out)
	}
	if got := strings.TrimSpace(out); got != own {
		t.Errorf("id -un: got %q; want %q", got, own)
	}
}

// TestServerShell: with Options.Shell, sshd logs in ShellUser's account,
// whose login shell runs the command.
func TestServerShell(t *testing.T) {
	s := Start(t, Options{Shell: "/bin/bash"})
	if s.User != ShellUser("/bin/bash") {
		t.Errorf("User: got %q; want %q", s.User, ShellUser("/bin/bash"))
	}
	out, err := login(t, s, s.User, `printf '%s\n' "$BASH_VERSION" "$SHELL"`)
	if err != nil {
		t.Fatalf("ssh: %v: %s", err, out)
	}
	if f := strings.Fields(out); len(f) != 2 || f[1] != "/bin/bash" {
		t.Errorf("the login shell: got %q; want bash's version and /bin/bash", out)
	}
}
