package sshtest

import (
	"bufio"
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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/actiongw/actiongw/internal/proc"
	"github.com/actiongw/actiongw/internal/syncbuf"
)

// User is the unprivileged account the server logs clients in as. Start
// creates it (shell /bin/sh, with a home directory) when it does not exist.
const User = "actiongw-test"

// PasswordUser is the account whose password SetPassword sets; it is separate
// from User so that password tests never change the account other packages
// log in to with keys.
const PasswordUser = "actiongw-pw"

// Options change the server's configuration. The zero value is a server with
// OpenSSH's defaults for everything not needed to run it in a temp dir.
type Options struct {
	// MaxSessions is sshd's MaxSessions; zero keeps OpenSSH's default (10).
	MaxSessions int
	// Config holds extra sshd_config lines, appended after the generated ones.
	Config []string
}

// Server is a running sshd. Its fields are read-only.
type Server struct {
	Host string // always "127.0.0.1"
	Port int
	User string // the unprivileged login user (User)

	// ClientKey is an unencrypted OpenSSH private key (PEM) listed in the
	// server's authorized_keys, for User and for root.
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
	configPath string
	authKeys   string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	log     *syncbuf.Buffer
	orphans []int // processes left behind by Crash, killed at cleanup
}

// Require fails the test under CI and skips it elsewhere when sshd cannot be
// run here (not installed, or the test is not running as root).
func Require(t testing.TB) {
	t.Helper()
	why := ""
	if _, err := exec.LookPath("sshd"); err != nil {
		if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
			why = "OpenSSH sshd is not installed (apt-get install openssh-server)"
		}
	}
	if why == "" && os.Geteuid() != 0 {
		why = "sshd integration tests must run as root (sshd switches to the test user)"
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// Start runs a new sshd on a free port of 127.0.0.1 and stops it, and every
// process it started, in t.Cleanup.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	Require(t)
	EnsureUser(t, User)
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatalf("create /run/sshd: %v", err)
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
	s := &Server{Host: "127.0.0.1", User: User, Dir: dir, t: t, authKeys: filepath.Join(dir, "authorized_keys")}

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
		s.Port = freePort(t)
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
		"LogLevel VERBOSE",
	}
	for _, k := range hostKeys {
		lines = append(lines, "HostKey "+k)
	}
	if opts.MaxSessions > 0 {
		lines = append(lines, "MaxSessions "+strconv.Itoa(opts.MaxSessions))
	}
	lines = append(lines, opts.Config...)
	s.configPath = filepath.Join(s.Dir, "sshd_config")
	if err := os.WriteFile(s.configPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// start runs sshd and waits until it sends its banner.
func (s *Server) start() error {
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		sshd = "/usr/sbin/sshd"
	}
	// sshd must be started by absolute path: it re-executes itself.
	cmd := exec.Command(sshd, "-D", "-e", "-f", s.configPath)
	log := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited, s.log = cmd, exited, log
	s.mu.Unlock()

	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("sshd exited during start-up")
		default:
		}
		if banner(s.Addr()) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	<-exited
	return fmt.Errorf("sshd did not answer on %s within 10s", s.Addr())
}

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
	tree := descendants(s.cmd.Process.Pid)
	s.cmd.Process.Kill()
	for _, pid := range tree {
		if comm(pid) == "sshd" {
			syscall.Kill(pid, syscall.SIGKILL)
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
	for _, pid := range descendants(s.cmd.Process.Pid) {
		if comm(pid) == "sshd" {
			syscall.Kill(pid, syscall.SIGSTOP)
		}
	}
}

// Restart starts sshd again, with the same configuration and port, after
// Crash.
func (s *Server) Restart() {
	s.t.Helper()
	var err error
	for range 50 { // the port may linger briefly after the crash
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("restart sshd: %v\n%s", err, s.Log())
}

func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pid := range append(descendants(s.cmd.Process.Pid), s.orphans...) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	s.cmd.Process.Kill()
	<-s.exited
	if s.t.Failed() {
		s.t.Logf("sshd log:\n%s", s.log.String())
	}
}

// UserDir returns a new directory owned by User, removed at cleanup, for
// files that remote commands write (pid files, markers).
func (s *Server) UserDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp(s.Dir, "user-")
	if err != nil {
		t.Fatal(err)
	}
	u, err := user.Lookup(User)
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

var userMu sync.Mutex

// EnsureUser creates the local account name (shell /bin/sh, home directory)
// if it does not exist, and makes sure its password field does not lock it:
// with UsePAM no, sshd refuses even key logins to a locked ("!") account.
func EnsureUser(t testing.TB, name string) {
	t.Helper()
	userMu.Lock()
	defer userMu.Unlock()
	if _, err := user.Lookup(name); err != nil {
		out, err := exec.Command("useradd", "--create-home", "--shell", "/bin/sh", name).CombinedOutput()
		// Another test process may have created it in the meantime.
		if err != nil && !strings.Contains(string(out), "already exists") {
			t.Fatalf("useradd %s: %v: %s", name, err, out)
		}
	}
	if shadowLocked(name) {
		if out, err := exec.Command("usermod", "-p", "*", name).CombinedOutput(); err != nil {
			t.Fatalf("usermod -p '*' %s: %v: %s", name, err, out)
		}
	}
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

// SetPassword gives PasswordUser a new random password and returns it.
func SetPassword(t testing.TB) []byte {
	t.Helper()
	EnsureUser(t, PasswordUser)
	b := make([]byte, 12)
	rand.Read(b)
	pw := []byte(hex.EncodeToString(b))
	cmd := exec.Command("chpasswd")
	cmd.Stdin = strings.NewReader(PasswordUser + ":" + string(pw) + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chpasswd: %v: %s", err, out)
	}
	return pw
}

// WaitGone waits up to d for process pid to be gone and reports whether it is.
func WaitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for proc.Alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// ReadPID waits up to d for path to hold a process id and returns it.
func ReadPID(t testing.TB, path string, d time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		data, err := os.ReadFile(path)
		if err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid > 0 {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s after %v", path, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// descendants lists every process below pid, parents before children.
func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp := proc.Parent(p); pp > 0 {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

func comm(pid int) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(data))
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
