//go:build linux

package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/mcpserver/mcphost"
	"github.com/actiongw/actiongw/secrets"
)

// served is a real `actiongw serve` process with a real sshd, a loopback
// HTTP server and secrets in the private Secret Service.
type served struct {
	client  *mcphost.Client
	sshd    *sshtest.Server
	api     *httptest.Server
	state   string
	stderr  *syncbuf.Buffer
	token   string
	hang    net.Listener // accepts TCP and never speaks
	release chan struct{}
	seen    syncbuf.Buffer // every tool result received, as JSON
	cfgPath string         // the config serve runs with
	env     []string       // serve's environment (its keyring service)
	tags    []string       // the build tags of serve's binary
	keyring *secrets.Keyring

	// userDir is a directory the login user owns, resolved, when the
	// tables name @USERDIR@.
	userDir string

	hangAccepts atomic.Int32 // connections hang accepted
	enteredMu   sync.Mutex
	entered     map[string]int // requests the API began, by path
}

// began reports how many requests for path the API has begun.
func (s *served) began(path string) int {
	s.enteredMu.Lock()
	defer s.enteredMu.Unlock()
	return s.entered[path]
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// startServed starts everything; the SSH target "box" stops commands with
// stopMode, "hang" points at a listener that never answers.
func startServed(t testing.TB, stopMode string) *served {
	t.Helper()
	return startServedWith(t, servedOptions{stopMode: stopMode})
}

// servedOptions vary startServed.
type servedOptions struct {
	stopMode string
	// server holds extra [server] lines, such as limits.
	server string
	// tables holds extra TOML tables, such as more targets; @PORT@,
	// @USER@ and @KNOWN_HOSTS@ become the test sshd's, @USERDIR@ a
	// directory its login user owns (served.userDir), and @API@ the URL of
	// the loopback API.
	tables string
	// prepare runs on the state directory before serve starts.
	prepare func(state string)
	// token is the API token in the keyring; empty means a random hex one.
	token string
	// testtools runs the build with the test tools (mcpserver's emit and
	// heap).
	testtools bool
	// env holds extra environment variables of serve, such as GODEBUG.
	env []string
}

// serveUser is the account the served sshd logs in as root: one that no
// other package's tests log in to. A stop that cannot see the whole of a
// command takes a census of every process of the login's uid that
// started during it, and another package's (a dead-man watcher's
// heartbeat, orphaned as its session ended) would rightly make the stop
// unverified.
const serveUser = "actiongw-serve"

func startServedWith(t testing.TB, o servedOptions) *served {
	t.Helper()
	stopMode := cmp.Or(o.stopMode, "signal")
	testenv.SecretService(t)
	s := &served{sshd: sshtest.Start(t, sshtest.Options{User: serveUser}), release: make(chan struct{}),
		token: cmp.Or(o.token, "tok-"+randomHex(t, 12)), stderr: &syncbuf.Buffer{}}
	s.api = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	t.Cleanup(func() { close(s.release); s.api.Close() })
	var err error
	if s.hang, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.hang.Close() })
	go func() {
		for {
			c, err := s.hang.Accept()
			if err != nil {
				return
			}
			s.hangAccepts.Add(1)
			t.Cleanup(func() { c.Close() })
		}
	}()

	service := "actiongw-test-" + randomHex(t, 6)
	kr := &secrets.Keyring{Service: service}
	s.keyring = kr
	ctx := context.Background()
	for name, v := range map[string][]byte{"box-key": s.sshd.ClientKey, "api-token": []byte(s.token)} {
		if err := kr.Set(ctx, name, v); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { kr.Delete(ctx, name) })
	}
	if strings.Contains(o.tables, "@USERDIR@") {
		var err error
		if s.userDir, err = filepath.EvalSymlinks(s.sshd.UserDir(t)); err != nil {
			t.Fatal(err)
		}
	}
	s.state = t.TempDir()
	if o.prepare != nil {
		o.prepare(s.state)
	}
	cfg := fmt.Sprintf(`
[server]
state_dir = %q
log_level = "debug"
%s
[ssh.box]
host = "127.0.0.1"
port = %d
user = %q
key_secret = "box-key"
known_hosts = %q
stop_mode = %q
[ssh.hang]
host = "127.0.0.1"
port = %d
user = "nobody"
key_secret = "box-key"
known_hosts = %q
[http.api]
base_url = %q
methods = ["GET", "POST"]
auth = "bearer"
token_secret = "api-token"
allow_private = true
max_attempts = 3
%s
`, s.state, o.server, s.sshd.Port, s.sshd.User, s.sshd.KnownHosts, stopMode, s.hang.Addr().(*net.TCPAddr).Port, s.sshd.KnownHosts, s.api.URL, strings.NewReplacer("@PORT@", fmt.Sprint(s.sshd.Port), "@USER@", s.sshd.User, "@KNOWN_HOSTS@", s.sshd.KnownHosts, "@USERDIR@", s.userDir, "@API@", s.api.URL, "@HOST_KEY@", s.sshd.Fingerprint()).Replace(o.tables))
	cfgPath := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s.cfgPath, s.env = cfgPath, append(append(os.Environ(), "ACTIONGW_KEYRING_SERVICE="+service), o.env...)
	if o.testtools || os.Getenv(profileEnv) != "" {
		s.tags = []string{"testtools"}
	}
	s.client = s.startServer(t, s.stderr)
	return s
}

// startServer starts another `actiongw serve` on s's config, state
// directory and keyring, with its stderr going to stderr, and initializes
// it; it is closed at cleanup.
func (s *served) startServer(t testing.TB, stderr *syncbuf.Buffer) *mcphost.Client {
	t.Helper()
	cmd := exec.Command(testenv.Actiongw(t, s.tags...), "serve", "-config", s.cfgPath)
	cmd.Env = s.env
	cmd.Stderr = stderr
	client, err := mcphost.Start(context.Background(), cmd, mcphost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.Initialize(ctx); err != nil {
		t.Fatalf("initialize: %v\nstderr:\n%s", err, stderr)
	}
	return client
}

// serveHTTP echoes the Authorization header; /slow-headers waits before
// answering, /slow-body streams slowly, /unavailable asks for a retry,
// /artifact gives binary bytes (artifact).
func (s *served) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.enteredMu.Lock()
	if s.entered == nil {
		s.entered = map[string]int{}
	}
	s.entered[r.URL.Path]++
	s.enteredMu.Unlock()
	switch r.URL.Path {
	case "/slow-headers":
		select {
		case <-r.Context().Done():
		case <-s.release:
		}
		return
	case "/slow-body":
		w.WriteHeader(200)
		for i := 0; ; i++ {
			fmt.Fprintf(w, "chunk %d\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-s.release:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	case "/artifact":
		w.Write(artifact())
		return
	case "/unavailable":
		w.Header().Set("Retry-After", "20")
		w.WriteHeader(503)
		return
	}
	fmt.Fprintf(w, "auth=%s\n", r.Header.Get("Authorization"))
}

func (s *served) call(t testing.TB, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.client.CallTool(ctx, name, args, nil)
	if err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", name, err, s.stderr)
	}
	b, _ := json.Marshal(res)
	s.seen.Write(b)
	return res
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func decode[T any](t testing.TB, r *mcp.CallToolResult) T {
	t.Helper()
	var v T
	b, err := json.Marshal(r.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, &v)
	}
	if err != nil {
		t.Fatalf("structured content: %v (text %q)", err, resultText(r))
	}
	return v
}

// promptly asserts that a small request on the same session is answered
// (a stuck session never answers: call's deadline ends the test).
func (s *served) promptly(t testing.TB) {
	t.Helper()
	r := s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "echo still here"})
	if out := decode[gateway.SSHExecOutput](t, r); out.Stdout.Head != "still here\n" {
		t.Fatalf("second request: %s", resultText(r))
	}
}

func TestServeActions(t *testing.T) {
	s := startServed(t, "signal")
	r := s.call(t, "list_targets", map[string]any{})
	if text := resultText(r); !strings.Contains(text, "2 SSH targets and 1 HTTP endpoint are") {
		t.Errorf("list_targets: %s", text)
	}

	r = s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "echo out; echo err >&2; echo " + s.token + "; exit 2"})
	out := decode[gateway.SSHExecOutput](t, r)
	if !r.IsError || out.Status != "exited" || *out.ExitCode != 2 || out.Stderr.Head != "err\n" {
		t.Errorf("ssh_exec: %+v (text %q)", out, resultText(r))
	}
	if out.Stdout.Head != "out\n[REDACTED:api-token]\n" {
		t.Errorf("stdout %q; want the token redacted", out.Stdout.Head)
	}

	r = s.call(t, "http_request", map[string]any{"endpoint": "api", "method": "GET", "path": "/echo"})
	h := decode[gateway.HTTPRequestOutput](t, r)
	if r.IsError || h.HTTPStatus != 200 || h.Body.Head != "auth=Bearer [REDACTED:api-token]\n" {
		t.Errorf("http_request: %+v (text %q)", h, resultText(r))
	}

	r = s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "seq 1 300000"})
	big := decode[gateway.SSHExecOutput](t, r)
	if !big.Stdout.Truncated || !strings.Contains(resultText(r), "read_output") {
		t.Errorf("a large output should be truncated with a way to read the rest: %s", resultText(r))
	}
	r = s.call(t, "read_output", map[string]any{"handle": big.Handle, "stream": "stdout", "offset": -7})
	if p := decode[output.Page](t, r); p.Data != "300000\n" || !p.EOF {
		t.Errorf("read_output from the end: %+v", p)
	}
	r = s.call(t, "search_output", map[string]any{"handle": big.Handle, "stream": "stdout", "pattern": "^29999[0-9]$", "max_matches": 2})
	if m := decode[output.SearchResult](t, r); len(m.Matches) != 2 || m.Matches[0].Line != 299990 {
		t.Errorf("search_output: %+v", m)
	}
	r = s.call(t, "read_output", map[string]any{"handle": "out_nope", "stream": "stdout"})
	if !r.IsError {
		t.Errorf("read_output of an unknown handle: isError false; want a tool error")
	}
	r = s.call(t, "ssh_exec", map[string]any{"target": "nowhere", "command": "true"})
	if !r.IsError || !strings.Contains(resultText(r), `unknown SSH target "nowhere"`) {
		t.Errorf("unknown target: %s", resultText(r))
	}
	s.client.Close()
	s.assertNoSecret(t)
	// Three actions ran (the refusals named no configured target), after
	// the record that starts the keyed chain.
	if n, err := audit.Verify(filepath.Join(s.state, "audit.jsonl")); err != nil || n != 7 {
		t.Errorf("audit log: %d records, %v; want a verified chain of 7", n, err)
	}
}

// assertNoSecret checks that no secret value reached the host (any tool
// result), stderr (at debug level) or any file the server wrote.
func (s *served) assertNoSecret(t testing.TB) {
	t.Helper()
	key := strings.TrimSpace(string(s.sshd.ClientKey))
	keyBody := strings.Split(key, "\n")[1] // a line of the PEM body
	for what, text := range map[string]string{"stderr": s.stderr.String(), "the host": s.seen.String()} {
		if strings.Contains(text, s.token) || strings.Contains(text, keyBody) {
			t.Errorf("a secret reached %s", what)
		}
	}
	if !strings.Contains(s.seen.String(), "[REDACTED:api-token]") {
		t.Errorf("the host saw no redaction marker; the canary test did not exercise redaction")
	}
	filepath.Walk(s.state, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		data, _ := os.ReadFile(path)
		if bytes.Contains(data, []byte(s.token)) || bytes.Contains(data, []byte(keyBody)) {
			t.Errorf("%s holds a secret", path)
		}
		return nil
	})
}

// waitPID reads the PID a remote command wrote to path.
func waitPID(t testing.TB, path string) int {
	t.Helper()
	return sshtest.ReadPID(t, path, 10*time.Second)
}

// outcomeOf finds the outcome record of the action whose intent ran command.
func outcomeOf(t testing.TB, state, command string) audit.Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		data, _ := os.ReadFile(filepath.Join(state, "audit.jsonl"))
		handle := ""
		for _, line := range strings.Split(string(data), "\n") {
			var r audit.Record
			if json.Unmarshal([]byte(line), &r) != nil {
				continue
			}
			if r.Kind == "intent" && r.Command == command {
				handle = r.Handle
			}
			if r.Kind == "outcome" && handle != "" && r.Handle == handle {
				return r
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no outcome record for %q", command)
	return audit.Record{}
}

// TestServeHeadroomNotResident: serve's GC headroom is address space, not
// memory. Were its pages written, an idle server would hold them all.
func TestServeHeadroomNotResident(t *testing.T) {
	if gcHeadroomSize(os.Getenv) == 0 {
		t.Skip("GOGC or GOMEMLIMIT is set: serve holds no headroom")
	}
	s := startServed(t, "signal")
	s.call(t, "health", map[string]any{})
	// An idle server holds about 23 MiB, 14 of them the binary's mapped
	// pages (RssFile) and 9 its own (RssAnon); with the headroom's pages
	// those would be 17. (It must not build the tables of
	// internal/zxcvbn, some 10 MiB, which only secret set and check use.)
	const anonLimit = 14 << 20
	anon := procMemory(t, s.client.Pid(), "RssAnon")
	if anon > anonLimit {
		t.Errorf("idle server anonymous resident memory %.1f MiB; want under %d MiB (GC headroom %d MiB, untouched)",
			float64(anon)/(1<<20), anonLimit>>20, gcHeadroom>>20)
	}
	t.Logf("idle server resident memory %.1f MiB, %.1f of it anonymous",
		float64(procMemory(t, s.client.Pid(), "VmRSS"))/(1<<20), float64(anon)/(1<<20))
}

func TestGCHeadroomSize(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want int
	}{
		{nil, gcHeadroom},
		{map[string]string{"GOGC": "50"}, 0},
		{map[string]string{"GOGC": "off", "GOMEMLIMIT": "1GiB"}, 0},
		{map[string]string{"GOMEMLIMIT": "256MiB"}, 0},
	}
	for _, tt := range tests {
		if got := gcHeadroomSize(func(k string) string { return tt.env[k] }); got != tt.want {
			t.Errorf("gcHeadroomSize(%v) = %d; want %d", tt.env, got, tt.want)
		}
	}
}

func TestServeCancelSSH(t *testing.T) {
	for _, mode := range []string{"signal", "wrapper"} {
		t.Run(mode, func(t *testing.T) {
			s := startServed(t, mode)
			tests := []struct {
				name    string
				command func(pidFile string) string
			}{
				{"during output", func(p string) string { return "echo $$ > " + p + "; exec yes" }},
				{"while silent", func(p string) string { return "echo $$ > " + p + "; exec sleep 60" }},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					pidFile := filepath.Join("/tmp", "actiongw-cancel-"+randomHex(t, 6))
					t.Cleanup(func() { os.Remove(pidFile) })
					command := tt.command(pidFile)
					var flowing sync.Once
					output := make(chan struct{}) // closed once output flows
					p, err := s.client.StartTool(context.Background(), "ssh_exec", map[string]any{"target": "box", "command": command},
						func(n mcp.ProgressNotificationParams) {
							if n.Progress > 0 {
								flowing.Do(func() { close(output) })
							}
						})
					if err != nil {
						t.Fatal(err)
					}
					pid := waitPID(t, pidFile)
					if tt.name == "during output" {
						<-output
					}
					cancelled := time.Now()
					if err := s.client.Cancel(p.ID(), "test cancel"); err != nil {
						t.Fatal(err)
					}
					if !sshtest.WaitGone(pid, 5*time.Second) {
						t.Fatalf("remote process %d still running 5s after the cancel", pid)
					}
					t.Logf("cancel -> remote process gone: %v", time.Since(cancelled))
					s.promptly(t)
					rec := outcomeOf(t, s.state, command)
					if rec.Status != "cancelled" || rec.RemoteStopped == nil || !*rec.RemoteStopped {
						t.Errorf("outcome %+v; want cancelled with remote_stopped true", rec)
					}
				})
			}
		})
	}
}

func TestServeCancelBeforeConnected(t *testing.T) {
	s := startServed(t, "signal")
	p, err := s.client.StartTool(context.Background(), "ssh_exec", map[string]any{"target": "hang", "command": "true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 20*time.Second, "the dial to wait for a banner", func() bool { return s.hangAccepts.Load() > 0 })
	if err := s.client.Cancel(p.ID(), "test cancel"); err != nil {
		t.Fatal(err)
	}
	s.promptly(t)
	if rec := outcomeOf(t, s.state, "true"); rec.Status != "cancelled" {
		t.Errorf("outcome %+v; want cancelled", rec)
	}
}

func TestServeCancelAfterResponse(t *testing.T) {
	s := startServed(t, "signal")
	p, err := s.client.StartTool(context.Background(), "ssh_exec", map[string]any{"target": "box", "command": "echo done"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitTool(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A cancel for a call that already answered is harmless.
	if err := s.client.Cancel(p.ID(), "late"); err != nil {
		t.Fatal(err)
	}
	s.promptly(t)
}

func TestServeCancelHTTP(t *testing.T) {
	s := startServed(t, "signal")
	for _, path := range []string{"/slow-headers", "/slow-body", "/unavailable"} {
		t.Run(path, func(t *testing.T) {
			p, err := s.client.StartTool(context.Background(), "http_request", map[string]any{"endpoint": "api", "method": "GET", "path": path}, nil)
			if err != nil {
				t.Fatal(err)
			}
			// In the phase: waiting for headers, streaming the body, or in
			// the retry backoff after the first 503.
			testenv.WaitFor(t, 20*time.Second, "the request to reach the API", func() bool { return s.began(path) > 0 })
			if err := s.client.Cancel(p.ID(), "test cancel"); err != nil {
				t.Fatal(err)
			}
			if r := s.call(t, "http_request", map[string]any{"endpoint": "api", "method": "GET", "path": "/echo"}); r.IsError {
				t.Errorf("second request after the cancel: %s", resultText(r))
			}
		})
	}
	data, _ := os.ReadFile(filepath.Join(s.state, "audit.jsonl"))
	if n := strings.Count(string(data), `"status":"cancelled"`); n != 3 {
		t.Errorf("%d cancelled outcomes in the audit log; want 3:\n%s", n, data)
	}
}

// TestServeShutdown ends the server with stdin closed, and with SIGTERM,
// while a command runs: the server exits by itself with status 0, the
// remote process is gone and the action's outcome is on record.
func TestServeShutdown(t *testing.T) {
	for _, how := range []string{"stdin EOF", "SIGTERM"} {
		t.Run(how, func(t *testing.T) {
			s := startServed(t, "signal")
			pidFile := filepath.Join("/tmp", "actiongw-shutdown-"+randomHex(t, 6))
			t.Cleanup(func() { os.Remove(pidFile) })
			command := "echo $$ > " + pidFile + "; exec sleep 60"
			if _, err := s.client.StartTool(context.Background(), "ssh_exec", map[string]any{"target": "box", "command": command}, nil); err != nil {
				t.Fatal(err)
			}
			pid := waitPID(t, pidFile)
			server, err := os.FindProcess(s.client.Pid())
			if err != nil {
				t.Fatal(err)
			}
			if how == "SIGTERM" {
				server.Signal(syscall.SIGTERM)
			}
			// Close closes stdin and kills the server if it is still up
			// after its timeout: a clean exit is status 0 either way.
			if err := s.client.Close(); err != nil {
				t.Errorf("server exit after %s: %v; want a clean exit, status 0", how, err)
			}
			if !sshtest.WaitGone(pid, 5*time.Second) {
				t.Errorf("remote process %d survived the server", pid)
			}
			rec := outcomeOf(t, s.state, command)
			if rec.Status != "cancelled" || !strings.Contains(rec.Reason, "shutting down") || rec.RemoteStopped == nil || !*rec.RemoteStopped {
				t.Errorf("outcome %+v; want cancelled by the shutdown with remote_stopped true", rec)
			}
		})
	}
}

// TestServeProgress asks for progress and gets a few notifications a
// second with growing byte counts.
func TestServeProgress(t *testing.T) {
	s := startServed(t, "signal")
	var mu sync.Mutex
	var seen []float64
	start := time.Now()
	res, err := s.client.CallTool(context.Background(), "ssh_exec",
		map[string]any{"target": "box", "command": "for i in $(seq 1 15); do seq 1 2000; sleep 0.1; done"},
		func(p mcp.ProgressNotificationParams) {
			mu.Lock()
			seen = append(seen, p.Progress)
			mu.Unlock()
		})
	if err != nil || res.IsError {
		t.Fatalf("ssh_exec: %v %s", err, resultText(res))
	}
	elapsed := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 2 || float64(len(seen)) > 5*elapsed.Seconds()+1 {
		t.Errorf("%d progress notifications in %v; want a few a second", len(seen), elapsed)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] < seen[i-1] {
			t.Errorf("progress went back: %v", seen)
		}
	}
}
