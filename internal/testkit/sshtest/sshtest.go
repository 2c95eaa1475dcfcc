package sshtest

import (
	"bufio"
	"cmp"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/actiongw/actiongw/internal/testkit/proc"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// User is the unprivileged account a root-run server logs clients in as.
// Under CI, Start creates it (shell /bin/sh, with a home directory) when it
// does not exist.
const User = "actiongw-test"

// PasswordUser is the account whose password SetPassword sets; it is separate
// from User so that password tests never change the account other packages
// log in to with keys.
const PasswordUser = "actiongw-pw"

// Options change the server's configuration. The zero value is a server with
// OpenSSH's defaults for everything not needed to run it in a temp dir, and
// with the SFTP subsystem (internal-sftp).
type Options struct {
	// MaxSessions is sshd's MaxSessions; zero keeps OpenSSH's default (10).
	MaxSessions int
	// LogLevel is sshd's LogLevel (DEBUG1 logs each direct-tcpip channel
	// it opens); empty is VERBOSE. Config cannot change it: sshd keeps
	// the first value of a keyword.
	LogLevel string
	// Config holds extra sshd_config lines, appended after the generated ones.
	Config []string
	// TrustedUserCAKeys is a CA public key (authorized_keys form, as in
	// CA.PublicKey) whose user certificates sshd accepts
	// (sshd_config TrustedUserCAKeys); nil trusts no CA.
	TrustedUserCAKeys []byte
	// Shell is the login shell (an absolute path, such as /bin/bash) of
	// the account sshd logs clients in as: ShellUser(Shell), created as
	// User is. It needs root; without it, or without the account outside
	// CI, Start ends the test with testenv.Missing. Empty logs in as
	// described in the package doc (User, whose shell is /bin/sh).
	Shell string
	// User is an account of the test's own for sshd to log clients in as
	// in place of User, such as one that no other package's tests log in
	// to (a census of a login's processes then sees only this package's);
	// it is created as User is. As root outside CI, without that account,
	// Start falls back to User, and on. Shell takes precedence.
	User string
}

// ShellUser is the account a server with Options.Shell set to shell logs
// in: "actiongw-sh-" and the shell's file name, an account of its own
// for each shell, so that no test changes the shell of another's.
func ShellUser(shell string) string { return "actiongw-sh-" + filepath.Base(shell) }

// Server is a running sshd. Its fields are read-only.
type Server struct {
	Host string // always "127.0.0.1"
	Port int
	// User is the account clients log in as: User when the tests run as
	// root (under CI, or where the account exists), root when they run as
	// root otherwise, and the current user when they do not run as root.
	User string
	// Signals reports whether sshd delivers "signal" requests in User's
	// sessions. OpenSSH serves a root login from its privileged monitor,
	// which refuses them ("session signalling requires privilege
	// separation"); a client must then signal from a second session.
	Signals bool
	// PTY reports whether sshd can give User's sessions a terminal: only
	// a root sshd can make the terminal device the user's
	// ("chown(/dev/pts/N) failed: Operation not permitted" otherwise).
	PTY bool

	// ClientKey is an unencrypted OpenSSH private key (PEM) listed in the
	// server's authorized_keys, for every account sshd may log in.
	ClientKey []byte
	// HostKeys are the server's host keys: ed25519 first, then ecdsa-p256.
	HostKeys []ssh.PublicKey
	// KnownHosts is a known_hosts file that records only the ed25519 host
	// key, so a client that does not restrict its host key algorithms to the
	// recorded ones negotiates ecdsa and reports a false mismatch.
	KnownHosts string
	// Dir is the server's private directory (config, keys, pid file, logs).
	Dir string

	t          testing.TB
	sshd       string // the binary's absolute path
	configPath string
	authKeys   string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  <-chan struct{}
	log     *syncbuf.Buffer
	orphans []int // processes left behind by Crash, killed at cleanup
}

// Require ends t with testenv.Missing when sshd cannot be run here: it is
// not installed, or the system is not Unix.
func Require(t testing.TB) {
	t.Helper()
	sshdPath(t)
}

// sshdPath returns sshd's absolute path (it must be started by one: it
// re-executes itself), or ends t with testenv.Missing.
func sshdPath(t testing.TB) string {
	t.Helper()
	const part = "OpenSSH sshd"
	if !unix {
		testenv.Missing(t, part, "the sshd tests run on Linux and other Unix systems, "+runtime.GOOS+" is not one")
	}
	if p, err := testenv.LookPath("sshd"); err == nil {
		return p
	}
	testenv.Missing(t, part, "install openssh-server (apt-get install openssh-server), "+testenv.Setup)
	return ""
}

// loginUser decides whom sshd logs in (see the package doc, Options.Shell
// and Options.User) and whether it delivers signals there.
func loginUser(t testing.TB, shell, own string) (name string, signals bool) {
	t.Helper()
	if shell != "" {
		testenv.Root(t, "a login shell of the test's choosing is an account's, which only root can create")
		name = ShellUser(shell)
		ensureUser(t, name, shell)
		return name, true
	}
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			t.Fatalf("current user: %v", err)
		}
		return u.Username, true
	}
	for _, name := range []string{own, User} {
		if _, err := user.Lookup(name); name != "" && (err == nil || testenv.CI()) {
			EnsureUser(t, name)
			return name, true
		}
	}
	return "root", false
}

// Start runs a new sshd on a free port of 127.0.0.1 and stops it, and every
// process it started, in t.Cleanup.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	sshd := sshdPath(t)
	login, signals := loginUser(t, opts.Shell, opts.User)
	if os.Geteuid() == 0 {
		// The privilege separation directory, which only a root sshd needs.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatalf("create /run/sshd: %v", err)
		}
	}
	// Not t.TempDir: sshd reads authorized_keys as the login user, who must
	// be able to traverse every parent directory.
	dir, err := os.MkdirTemp("", "sshtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &Server{Host: "127.0.0.1", User: login, Signals: signals, PTY: os.Geteuid() == 0, Dir: dir, t: t, sshd: sshd, authKeys: filepath.Join(dir, "authorized_keys")}

	var hostKeyPaths []string
	for _, k := range []struct {
		name string
		gen  func() (any, error)
	}{
		{"ed25519", func() (any, error) { _, k, err := ed25519.GenerateKey(rand.Reader); return k, err }},
		{"ecdsa", func() (any, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }},
	} {
		priv, err := k.gen()
		if err != nil {
			t.Fatal(err)
		}
		pemBytes, signer := marshalKey(t, priv)
		path := filepath.Join(dir, "host_"+k.name)
		if err := os.WriteFile(path, pemBytes, 0o600); err != nil {
			t.Fatal(err)
		}
		hostKeyPaths = append(hostKeyPaths, path)
		s.HostKeys = append(s.HostKeys, signer.PublicKey())
	}

	var signer ssh.Signer
	s.ClientKey, signer = NewKey(t)
	s.Authorize(signer.PublicKey())

	for attempt := 0; ; attempt++ {
		s.Port = testenv.FreePort(t)
		s.writeConfig(opts, hostKeyPaths)
		err := s.start()
		if err == nil {
			break
		}
		if attempt == 4 {
			t.Fatalf("start sshd: %v\n%s", err, s.log.String())
		}
	}
	s.KnownHosts = filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(s.KnownHosts, []byte(s.KnownHostsLine(s.HostKeys[0])+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	return s
}

func (s *Server) writeConfig(opts Options, hostKeys []string) {
	lines := []string{
		"Port " + strconv.Itoa(s.Port),
		"ListenAddress 127.0.0.1",
		"PidFile " + filepath.Join(s.Dir, "sshd.pid"),
		"AuthorizedKeysFile " + s.authKeys,
		"StrictModes no",
		"UsePAM no",
		"PermitRootLogin prohibit-password",
		"PasswordAuthentication yes",
		"KbdInteractiveAuthentication no",
		"PrintMotd no",
		"PrintLastLog no",
		"MaxStartups 100",
		"LogLevel " + cmp.Or(opts.LogLevel, "VERBOSE"),
		// In-process, so no sftp-server path to find.
		"Subsystem sftp internal-sftp",
	}
	for _, k := range hostKeys {
		lines = append(lines, "HostKey "+k)
	}
	if opts.MaxSessions > 0 {
		lines = append(lines, "MaxSessions "+strconv.Itoa(opts.MaxSessions))
	}
	if opts.TrustedUserCAKeys != nil {
		path := filepath.Join(s.Dir, "trusted_user_ca_keys")
		if err := os.WriteFile(path, opts.TrustedUserCAKeys, 0o644); err != nil {
			s.t.Fatal(err)
		}
		lines = append(lines, "TrustedUserCAKeys "+path)
	}
	lines = append(lines, opts.Config...)
	s.configPath = filepath.Join(s.Dir, "sshd_config")
	if err := os.WriteFile(s.configPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// start runs sshd and waits until it sends its banner.
func (s *Server) start() error {
	cmd := exec.Command(s.sshd, "-D", "-e", "-f", s.configPath)
	exited, log, err := testenv.StartDaemon(cmd, startTimeout, func() bool { return banner(s.Addr()) })
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = log
	if err != nil {
		return fmt.Errorf("%w on %s", err, s.Addr())
	}
	s.cmd, s.exited = cmd, exited
	return nil
}

// startTimeout bounds sshd's start-up, which takes milliseconds when the
// machine is idle.
const startTimeout = 30 * time.Second

func banner(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.HasPrefix(line, "SSH-2.0-")
}

// RequireSignals ends t with testenv.Missing unless sshd delivers "signal"
// requests in User's sessions (Server.Signals).
func (s *Server) RequireSignals(t testing.TB) {
	t.Helper()
	if !s.Signals {
		t.Log("needs sshd to deliver signal requests, which OpenSSH refuses for root logins")
		testenv.Missing(t, "the account "+User, accountHow)
	}
}

// RequirePTY ends t with testenv.Missing unless sshd can give User's
// sessions a terminal (Server.PTY).
func (s *Server) RequirePTY(t testing.TB) {
	t.Helper()
	if !s.PTY {
		testenv.Root(t, "only a root sshd can hand a terminal to its user")
	}
}

// Addr is "127.0.0.1:port".
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// KnownHostsLine is the known_hosts line that records key for this server.
func (s *Server) KnownHostsLine(key ssh.PublicKey) string {
	return knownhosts.Line([]string{s.Addr()}, key)
}

// Fingerprint is the SHA256 fingerprint of the ed25519 host key.
func (s *Server) Fingerprint() string { return ssh.FingerprintSHA256(s.HostKeys[0]) }

// Authorize adds pub to the authorized_keys file shared by all users.
func (s *Server) Authorize(pub ssh.PublicKey) {
	f, err := os.OpenFile(s.authKeys, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(ssh.MarshalAuthorizedKey(pub)); err != nil {
		s.t.Fatal(err)
	}
}

// Log returns what sshd has written to stderr so far.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// PID is the process id of the listening sshd.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}

// Crash kills the listening sshd and every per-connection sshd process with
// SIGKILL, as when the host goes away; the commands they ran are left running
// (as on a real host) and are killed at cleanup.
func (s *Server) Crash() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	tree := proc.Descendants(s.cmd.Process.Pid)
	s.cmd.Process.Kill()
	for _, pid := range tree {
		if isSSHD(pid) {
			kill(pid)
		} else {
			s.orphans = append(s.orphans, pid)
		}
	}
	<-s.exited
}

// Freeze stops (SIGSTOP) every per-connection sshd process, so that open
// connections stay up but never answer again, as on a wedged host or
// network; new connections are still served. Frozen processes are killed
// at cleanup.
func (s *Server) Freeze() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pid := range proc.Descendants(s.cmd.Process.Pid) {
		if isSSHD(pid) {
			freeze(pid)
		}
	}
}

// Restart starts sshd again, with the same configuration and port, after
// Crash.
func (s *Server) Restart() {
	s.t.Helper()
	var err error
	// The port may linger briefly after the crash.
	if !testenv.Eventually(startTimeout, func() bool { err = s.start(); return err == nil }) {
		s.t.Fatalf("restart sshd: %v\n%s", err, s.Log())
	}
}

func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pid := range append(proc.Descendants(s.cmd.Process.Pid), s.orphans...) {
		kill(pid)
	}
	s.cmd.Process.Kill()
	<-s.exited
	if s.t.Failed() {
		s.t.Logf("sshd log:\n%s", s.log.String())
	}
}

// UserDir returns a new directory owned by the login user (Server.User),
// removed at cleanup, for files that remote commands write (pid files,
// markers).
func (s *Server) UserDir(t testing.TB) string {
	t.Helper()
	return s.UserDirOf(t, s.User)
}

// UserDirOf is UserDir for the files of another account, name.
func (s *Server) UserDirOf(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp(s.Dir, "user-")
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		return dir // the login user made it
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// NewKey returns a new ed25519 client key as an unencrypted OpenSSH PEM
// private key and its signer.
func NewKey(t testing.TB) ([]byte, ssh.Signer) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return marshalKey(t, priv)
}

// EncryptKey returns pemKey re-encoded with passphrase.
func EncryptKey(t testing.TB, pemKey, passphrase []byte) []byte {
	t.Helper()
	raw, err := ssh.ParseRawPrivateKey(pemKey)
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := raw.(*ed25519.PrivateKey); ok {
		raw = *k
	}
	block, err := ssh.MarshalPrivateKeyWithPassphrase(raw, "", passphrase)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}

func marshalKey(t testing.TB, priv any) ([]byte, ssh.Signer) {
	t.Helper()
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	pemBytes := pem.EncodeToMemory(block)
	signer, err := ssh.ParsePrivateKey(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	return pemBytes, signer
}

// accountHow says how to get a missing account (of shell /bin/sh, or
// another: see shellHow).
const accountHow = "the tests create it only as root under CI: run `bash .ci/run` as root, or create it yourself with useradd --create-home --shell /bin/sh"

// shellHow is accountHow for an account whose login shell is shell.
func shellHow(shell string) string {
	return strings.Replace(accountHow, "--shell /bin/sh", "--shell "+shell, 1)
}

var userMu sync.Mutex

// EnsureUser makes sure the local account name exists, creating it (shell
// /bin/sh, home directory) when the tests run as root under CI, and that
// its password field does not lock it: with UsePAM no, sshd refuses even
// key logins to a locked ("!") account. Where it cannot create a missing
// account it ends t with testenv.Missing: tests add system accounts only
// on a CI machine.
func EnsureUser(t testing.TB, name string) {
	t.Helper()
	ensureUser(t, name, "")
}

// ensureUser is EnsureUser for an account whose login shell is shell; ""
// creates it with /bin/sh and keeps the shell of one that exists. A shell
// that is not there ends t with testenv.Missing, and so does an account
// with another shell, except as root under CI, where usermod changes it.
func ensureUser(t testing.TB, name, shell string) {
	t.Helper()
	create := shell
	if shell == "" {
		create = "/bin/sh"
	} else if _, err := os.Stat(shell); err != nil {
		testenv.Missing(t, "the shell "+shell, "install it (apt-get install "+filepath.Base(shell)+"), "+testenv.Setup)
	}
	mayChange := os.Geteuid() == 0 && testenv.CI()
	if _, err := user.Lookup(name); err != nil && !mayChange {
		testenv.Missing(t, "the account "+name, shellHow(create))
	}
	if shell != "" && !mayChange {
		if got := loginShell(name); got != shell {
			testenv.Missing(t, "the account "+name+" with the login shell "+shell+" (it has "+got+")", "usermod --shell "+shell+" "+name+", "+testenv.Setup)
		}
	}
	userMu.Lock()
	defer userMu.Unlock()
	if _, err := user.Lookup(name); err != nil {
		out, err := exec.Command(testenv.Command(t, "useradd", "passwd"), "--create-home", "--shell", create, name).CombinedOutput()
		// Another test process may have created it in the meantime.
		if err != nil && !strings.Contains(string(out), "already exists") {
			t.Fatalf("useradd %s: %v: %s", name, err, out)
		}
	}
	if shell != "" && loginShell(name) != shell {
		if out, err := exec.Command(testenv.Command(t, "usermod", "passwd"), "--shell", shell, name).CombinedOutput(); err != nil {
			t.Fatalf("usermod --shell %s %s: %v: %s", shell, name, err, out)
		}
	}
	if shadowLocked(name) {
		if out, err := exec.Command(testenv.Command(t, "usermod", "passwd"), "-p", "*", name).CombinedOutput(); err != nil {
			t.Fatalf("usermod -p '*' %s: %v: %s", name, err, out)
		}
	}
}

// loginShell is name's login shell in /etc/passwd, "" when it has no line
// there.
func loginShell(name string) string {
	data, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Split(line, ":"); len(f) == 7 && f[0] == name {
			return f[6]
		}
	}
	return ""
}

func shadowLocked(name string) bool {
	data, err := os.ReadFile("/etc/shadow")
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) > 1 && f[0] == name {
			return strings.HasPrefix(f[1], "!")
		}
	}
	return false
}

// SetPassword gives PasswordUser a new random password and returns it. It
// needs root (sshd reads passwords from /etc/shadow) and the account (see
// EnsureUser); without them it ends t with testenv.Missing.
func SetPassword(t testing.TB) []byte {
	t.Helper()
	testenv.Root(t, "password logins: sshd checks /etc/shadow, and chpasswd sets it")
	EnsureUser(t, PasswordUser)
	b := make([]byte, 12)
	rand.Read(b)
	pw := []byte(hex.EncodeToString(b))
	cmd := exec.Command(testenv.Command(t, "chpasswd", "passwd"))
	cmd.Stdin = strings.NewReader(PasswordUser + ":" + string(pw) + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chpasswd: %v: %s", err, out)
	}
	return pw
}

// WaitGone waits up to d for process pid to be gone and reports whether it is.
func WaitGone(pid int, d time.Duration) bool {
	return testenv.Eventually(d, func() bool { return !proc.Alive(pid) })
}

// ReadPID waits up to d for path to hold a process id and returns it.
func ReadPID(t testing.TB, path string, d time.Duration) int {
	t.Helper()
	pid := 0
	testenv.WaitFor(t, d, "a pid in "+path, func() bool {
		data, err := os.ReadFile(path)
		if err == nil {
			pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		}
		return err == nil && pid > 0
	})
	return pid
}

// isSSHD reports whether pid is one of sshd's own processes ("sshd", or
// "sshd-session" and "sshd-auth" since OpenSSH 9.8), not a command it ran.
func isSSHD(pid int) bool { return strings.HasPrefix(proc.Name(pid), "sshd") }
