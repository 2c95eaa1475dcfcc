//go:build unix

package demo_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/crypto/ssh"

	"github.com/actiongw/actiongw/internal/demo"
	"github.com/actiongw/actiongw/internal/testkit/proc"
	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/secrets"
)

func TestMain(m *testing.M) {
	testenv.Main(m, func() error { return goleak.Find() })
}

// start starts a sandbox that the test closes.
func start(t *testing.T) *demo.Sandbox {
	t.Helper()
	sb, err := demo.Start(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Error(err)
		}
	})
	return sb
}

func secret(t *testing.T, sb *demo.Sandbox, name string) []byte {
	t.Helper()
	v, err := sb.Secrets.Get(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return v.Reveal()
}

// dial connects to the sandbox's SSH server as the configured target does:
// its key from the store, its host key checked against the pinned
// fingerprint.
func dial(t *testing.T, sb *demo.Sandbox) *ssh.Client {
	t.Helper()
	signer, err := ssh.ParsePrivateKey(secret(t, sb, demo.KeySecret))
	if err != nil {
		t.Fatal(err)
	}
	c, err := dialWith(sb, sb.Config.SSH[demo.SSHTarget].User, ssh.PublicKeys(signer))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func dialWith(sb *demo.Sandbox, user string, auth ...ssh.AuthMethod) (*ssh.Client, error) {
	target := sb.Config.SSH[demo.SSHTarget]
	return ssh.Dial("tcp", net.JoinHostPort(target.Host, strconv.Itoa(target.Port)), &ssh.ClientConfig{
		User: user,
		Auth: auth,
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			if got := ssh.FingerprintSHA256(key); got != target.HostKey {
				return fmt.Errorf("host key %s; want the pinned %s", got, target.HostKey)
			}
			return nil
		},
		Timeout: 10 * time.Second,
	})
}

func TestConfig(t *testing.T) {
	sb := start(t)
	cfg := sb.Config
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the sandbox's config does not validate: %v", err)
	}
	s, h := cfg.SSH[demo.SSHTarget], cfg.HTTP[demo.HTTPEndpoint]
	if len(cfg.SSH) != 1 || len(cfg.HTTP) != 1 || s == nil || h == nil {
		t.Fatalf("got targets %v and %v; want %q and %q", cfg.SSH, cfg.HTTP, demo.SSHTarget, demo.HTTPEndpoint)
	}
	if s.Host != "127.0.0.1" || !strings.HasPrefix(h.BaseURL, "http://127.0.0.1:") {
		t.Errorf("got ssh host %q, base_url %q; want both on 127.0.0.1", s.Host, h.BaseURL)
	}
	if s.KeySecret != demo.KeySecret || h.TokenSecret != demo.TokenSecret || h.Auth != "bearer" || !h.AllowPrivate {
		t.Errorf("got key_secret %q, token_secret %q, auth %q, allow_private %v", s.KeySecret, h.TokenSecret, h.Auth, h.AllowPrivate)
	}
	if !slices.Equal(h.Methods, []string{"GET", "POST"}) || !slices.Equal(h.ApproveMethods, []string{"POST"}) {
		t.Errorf("got methods %q, approve_methods %q; want GET and POST, and a POST approved by a person first", h.Methods, h.ApproveMethods)
	}
	if !strings.HasPrefix(s.HostKey, "SHA256:") {
		t.Errorf("got host_key %q; want a pinned fingerprint", s.HostKey)
	}
	for _, name := range cfg.SecretNames() {
		if v := secret(t, sb, name); len(v) < 32 {
			t.Errorf("secret %s is %d bytes; want a real credential", name, len(v))
		}
	}
	_, err := sb.Secrets.Get(context.Background(), "nope")
	var nf *secrets.NotFoundError
	if !errors.As(err, &nf) {
		t.Errorf("Get of an unknown name: got %v; want *secrets.NotFoundError", err)
	}
}

// Each sandbox has its own keys and token.
func TestFreshCredentials(t *testing.T) {
	a, b := start(t), start(t)
	for _, name := range []string{demo.KeySecret, demo.TokenSecret} {
		if bytes.Equal(secret(t, a, name), secret(t, b, name)) {
			t.Errorf("two sandboxes share %s", name)
		}
	}
	if a.Config.SSH[demo.SSHTarget].HostKey == b.Config.SSH[demo.SSHTarget].HostKey {
		t.Error("two sandboxes share a host key")
	}
}

func TestAuth(t *testing.T) {
	sb := start(t)
	user := sb.Config.SSH[demo.SSHTarget].User
	good, err := ssh.ParsePrivateKey(secret(t, sb, demo.KeySecret))
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, _ := ed25519.GenerateKey(rand.Reader)
	other, _ := ssh.NewSignerFromKey(otherKey)
	cases := []struct {
		name string
		user string
		auth ssh.AuthMethod
		ok   bool
	}{
		{"the sandbox key", user, ssh.PublicKeys(good), true},
		{"another key", user, ssh.PublicKeys(other), false},
		{"the sandbox key for another user", user + "x", ssh.PublicKeys(good), false},
		{"a password", user, ssh.Password(string(secret(t, sb, demo.TokenSecret))), false},
		{"keyboard-interactive", user, ssh.KeyboardInteractive(func(string, string, []string, []bool) ([]string, error) { return nil, nil }), false},
	}
	for _, c := range cases {
		client, err := dialWith(sb, c.user, c.auth)
		if got := err == nil; got != c.ok {
			t.Errorf("%s: got error %v; want success %v", c.name, err, c.ok)
		}
		if client != nil {
			client.Close()
		}
	}
}

func TestExec(t *testing.T) {
	sb := start(t)
	client := dial(t, sb)
	cases := []struct {
		name, command, stdin string
		stdout, stderr       string
		status               int    // exit status, or -1 for a signal
		signal               string // with status -1
	}{
		{name: "output on both streams", command: "echo out; echo err >&2", stdout: "out\n", stderr: "err\n"},
		{name: "exit status", command: "echo x; exit 3", stdout: "x\n", status: 3},
		{name: "stdin", command: "tr a-z A-Z", stdin: "hello\n", stdout: "HELLO\n"},
		{name: "no stdin reads end of file", command: "cat; echo done", stdout: "done\n"},
		{name: "killed by a signal", command: "kill -TERM $$", status: -1, signal: "TERM"},
		{name: "signal without an RFC name", command: "kill -PROF $$", status: 128 + int(syscall.SIGPROF)},
		{name: "output written after the shell exits", command: "(sleep 0.2; echo late) &", stdout: "late\n"},
		{name: "a command that does not exist", command: "no-such-command-here", status: 127, stderr: "*"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := client.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var stdout, stderr bytes.Buffer
			s.Stdout, s.Stderr, s.Stdin = &stdout, &stderr, strings.NewReader(c.stdin)
			err = s.Run(c.command)
			status, signal := 0, ""
			var ee *ssh.ExitError
			switch {
			case errors.As(err, &ee):
				status, signal = ee.ExitStatus(), ee.Signal()
				if signal != "" {
					status = -1
				}
			case err != nil:
				t.Fatal(err)
			}
			if status != c.status || signal != c.signal {
				t.Errorf("got status %d, signal %q; want %d, %q", status, signal, c.status, c.signal)
			}
			if stdout.String() != c.stdout {
				t.Errorf("got stdout %q; want %q", stdout.String(), c.stdout)
			}
			if c.stderr == "*" && stderr.Len() == 0 || c.stderr != "*" && stderr.String() != c.stderr {
				t.Errorf("got stderr %q; want %q", stderr.String(), c.stderr)
			}
		})
	}
}

// A large output arrives whole before the exit status, through the
// channel's flow control.
func TestExecLargeOutput(t *testing.T) {
	sb := start(t)
	s, err := dial(t, sb).NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n countWriter
	s.Stdout = &n
	const size = 20 << 20
	if err := s.Run(fmt.Sprintf("head -c %d /dev/zero; head -c 1000 /dev/zero >&2", size)); err != nil {
		t.Fatal(err)
	}
	if n != size {
		t.Errorf("got %d bytes; want %d", n, size)
	}
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// The server refuses what it does not offer: terminals, shells, a second
// command, and any channel but a session (so no port forwarding).
func TestRefusals(t *testing.T) {
	sb := start(t)
	client := dial(t, sb)
	for _, req := range []string{"pty-req", "shell", "subsystem", "env", "x11-req"} {
		s, err := client.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		// Zero payloads: a refusal does not depend on parsing them.
		ok, err := sessionRequest(s, req)
		if err != nil || ok {
			t.Errorf("%s: got ok %v, error %v; want refused", req, ok, err)
		}
		s.Close()
	}
	s, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("sleep 0.2"); err != nil {
		t.Fatal(err)
	}
	if err := s.Start("true"); err == nil {
		t.Error("a second exec on one session: got accepted; want refused")
	}
	s.Wait()
	s.Close()
	if _, err := client.Dial("tcp", sb.Config.HTTP[demo.HTTPEndpoint].BaseURL[len("http://"):]); err == nil {
		t.Error("direct-tcpip: got a forwarded connection; want refused")
	}
	if _, err := client.Listen("tcp", "127.0.0.1:0"); err == nil {
		t.Error("tcpip-forward: got a remote listener; want refused")
	}
}

// sessionRequest sends an empty request of type typ on a session.
func sessionRequest(s *ssh.Session, typ string) (bool, error) {
	return s.SendRequest(typ, true, nil)
}

// readPIDs starts command on a new session and reads the pids it prints
// on its first line.
func readPIDs(t *testing.T, client *ssh.Client, command string) (*ssh.Session, []int) {
	t.Helper()
	s, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(command); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(line) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("got first line %q; want pids", line)
		}
		pids = append(pids, pid)
	}
	for _, pid := range pids {
		if !proc.Alive(pid) {
			t.Fatalf("process %d is not running", pid)
		}
	}
	go io.Copy(io.Discard, out)
	return s, pids
}

// group starts a shell with a child in its process group and prints both
// pids.
const group = "sleep 60 & echo $$ $!; wait"

func assertGone(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		if !sshtest.WaitGone(pid, 30*time.Second) {
			t.Errorf("process %d still running 30s later", pid)
		}
	}
}

// A "signal" request reaches the command's whole process group.
func TestSignal(t *testing.T) {
	sb := start(t)
	client := dial(t, sb)
	s, pids := readPIDs(t, client, group)
	defer s.Close()
	if err := s.Signal(ssh.SIGTERM); err != nil {
		t.Fatal(err)
	}
	assertGone(t, pids)
	err := s.Wait()
	var ee *ssh.ExitError
	if !errors.As(err, &ee) || ee.Signal() != "TERM" {
		t.Errorf("got %v; want the shell killed by TERM", err)
	}

	// After the command ended a signal is refused, not sent to a stale
	// process group.
	s2, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := s2.Run("true"); err != nil {
		t.Fatal(err)
	}
	if ok, err := s2.SendRequest("signal", true, ssh.Marshal(&struct{ Signal string }{"TERM"})); ok && err == nil {
		t.Error("signal after the command ended: got accepted; want refused")
	}
	if ok, _ := s.SendRequest("signal", true, ssh.Marshal(&struct{ Signal string }{"NOPE"})); ok {
		t.Error("unknown signal: got accepted; want refused")
	}
}

// Closing the channel, the connection or the sandbox kills the command's
// process group, so a client that gives up leaves nothing running.
func TestCloseKillsProcessGroup(t *testing.T) {
	cases := []struct {
		name  string
		close func(*demo.Sandbox, *ssh.Client, *ssh.Session)
	}{
		{"channel", func(_ *demo.Sandbox, _ *ssh.Client, s *ssh.Session) { s.Close() }},
		{"connection", func(_ *demo.Sandbox, c *ssh.Client, _ *ssh.Session) { c.Close() }},
		{"sandbox", func(sb *demo.Sandbox, _ *ssh.Client, _ *ssh.Session) { sb.Close() }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sb := start(t)
			client := dial(t, sb)
			s, pids := readPIDs(t, client, group)
			c.close(sb, client, s)
			assertGone(t, pids)
			s.Close()
		})
	}
}

// Close ends commands that keep their output open and removes the state
// directory.
func TestSandboxClose(t *testing.T) {
	sb, err := demo.Start(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	client := dial(t, sb)
	// The grandchild leaves the process group but holds stdout open.
	s, pids := readPIDs(t, client, "setsid sleep 60 & echo $$ $!; wait")
	defer s.Close()
	// pipeGrace bounds Close: a hang is the failure.
	testenv.Returns(t, time.Minute, "Close with a command holding its output open", func() { err = sb.Close() })
	if err != nil {
		t.Fatal(err)
	}
	assertGone(t, pids[:1])
	syscall.Kill(pids[1], syscall.SIGKILL) // outside the group by design: the test cleans it up
	if _, err := os.Stat(sb.Config.Server.StateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state directory after Close: got %v; want it removed", err)
	}
	if _, err := dialWith(sb, "x"); err == nil {
		t.Error("dial after Close: got a connection; want refused")
	}
	if err := sb.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestHTTPAPI(t *testing.T) {
	sb := start(t)
	base := sb.Config.HTTP[demo.HTTPEndpoint].BaseURL
	token := string(secret(t, sb, demo.TokenSecret))
	cases := []struct {
		name, path, auth string
		post             string // the body of a POST; empty: a GET
		status           int
		body             string // a line the body must hold
	}{
		{"echo", "/echo?q=1", "Bearer " + token, "", 200, "Authorization: Bearer " + token},
		{"echo request line", "/echo?q=1", "Bearer " + token, "", 200, "GET /echo?q=1 HTTP/1.1"},
		{"index", "/", "Bearer " + token, "", 200, "GET /echo"},
		{"slow", "/slow?lines=3", "Bearer " + token, "", 200, "line 3 of 3"},
		{"slow bounded", "/slow?lines=601", "Bearer " + token, "", 400, "lines must be 1-600"},
		{"deploy", "/deploy", "Bearer " + token, `{"service":"web","version":"1.4.2"}`, 202, "deploy of web 1.4.2 accepted"},
		{"deploy without a version", "/deploy", "Bearer " + token, `{"service":"web"}`, 400, "the body must be JSON"},
		{"deploy too large", "/deploy", "Bearer " + token, `{"service":"` + strings.Repeat("w", 5000) + `","version":"1"}`, 400, "the body must be JSON"},
		{"deploy by GET", "/deploy", "Bearer " + token, "", 405, ""},
		{"no token", "/echo", "", "", 401, "missing or wrong bearer token"},
		{"deploy without a token", "/deploy", "", `{"service":"web","version":"1.4.2"}`, 401, "missing or wrong bearer token"},
		{"wrong token", "/echo", "Bearer " + token + "x", "", 401, "missing or wrong bearer token"},
		{"unknown path", "/nope", "Bearer " + token, "", 404, ""},
	}
	for _, c := range cases {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", base+c.path, nil)
		if c.post != "" {
			req, _ = http.NewRequestWithContext(t.Context(), "POST", base+c.path, strings.NewReader(c.post))
		}
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.body) {
			t.Errorf("%s: got %d %q; want %d with %q", c.name, resp.StatusCode, body, c.status, c.body)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}

// Close ends a request that is still streaming.
func TestHTTPCloseDuringSlow(t *testing.T) {
	sb, err := demo.Start(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", sb.Config.HTTP[demo.HTTPEndpoint].BaseURL+"/slow?lines=600", nil)
	req.Header.Set("Authorization", "Bearer "+string(secret(t, sb, demo.TokenSecret)))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "line 1 of 600\n" {
		t.Fatalf("got %q, %v; want the first line", line, err)
	}
	testenv.Returns(t, time.Minute, "Close with a streaming request", func() { err = sb.Close() })
	if err != nil {
		t.Fatal(err)
	}
}

// GroupAlive counts live members of a process group, not zombies.
func TestGroupAlive(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 60 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	if !demo.GroupAlive(pgid) {
		t.Errorf("GroupAlive(%d) of a running group: got false; want true", pgid)
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	// Not reaped yet, the shell is a zombie: the group has no live process.
	if !testenv.Eventually(30*time.Second, func() bool { return !demo.GroupAlive(pgid) }) {
		t.Errorf("GroupAlive(%d) of a killed group: got true; want false", pgid)
	}
	if err := syscall.Kill(pgid, 0); err != nil {
		t.Errorf("the shell should still be an unreaped zombie: kill -0: %v", err)
	}
	cmd.Wait()
	if demo.GroupAlive(pgid) {
		t.Errorf("GroupAlive(%d) after reaping: got true; want false", pgid)
	}
}
