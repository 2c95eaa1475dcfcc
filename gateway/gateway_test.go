package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/demo"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/secrets"
)

const apiToken = "tok-3f9a8b7c6d5e4f"

// The gateway's pipeline (policy, secrets, execute, capture, spool, audit)
// does not depend on OpenSSH's own behaviour, so these tests run it against
// the demo sandbox's in-process SSH server, on any machine; sshexec's tests
// and the release gate prove it against a real sshd.

type fixture struct {
	gw    *Gateway
	cfg   *config.Config
	api   *httptest.Server
	state string
	store secrets.Memory
	toml  string // the config cfg was parsed from
}

// newFixture starts the demo sandbox (for its SSH server, which runs
// commands as the current user) and a loopback HTTP server that echoes the
// Authorization header, and a gateway configured for both: SSH targets box
// (which denies "reboot"), single (one action at a time) and nokey (its
// secret missing), HTTP endpoints api (bearer) and basic.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	sb, err := demo.Start(context.Background(), nil)
	if errors.Is(err, errors.ErrUnsupported) {
		testenv.Missing(t, "the demo's SSH server", err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	sshd := sb.Config.SSH[demo.SSHTarget]
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "echo:"+r.Header.Get("Authorization"))
		fmt.Fprintf(w, "path=%s auth=%s\n", r.URL.Path, r.Header.Get("Authorization"))
	}))
	t.Cleanup(api.Close)
	state := t.TempDir()
	target := func(name, secret, extra string) string {
		return fmt.Sprintf("[ssh.%s]\nhost = %q\nport = %d\nuser = %q\nkey_secret = %q\nhost_key = %q\n%s\n",
			name, sshd.Host, sshd.Port, sshd.User, secret, sshd.HostKey, extra)
	}
	toml := fmt.Sprintf(`
[server]
state_dir = %q
queue_wait = "300ms"
%s%s%s
[http.api]
base_url = %q
methods = ["GET", "POST"]
auth = "bearer"
token_secret = "api-token"
allow_private = true
[http.basic]
base_url = %q
auth = "basic"
user = "deploy"
password_secret = "api-token"
allow_private = true
`, state, target("box", "box-key", `deny_commands = ["reboot"]`), target("single", "box-key", "max_concurrent = 1"),
		target("nokey", "missing-key", ""), api.URL, api.URL)
	cfg, err := config.Parse([]byte(toml))
	if err != nil {
		t.Fatal(err)
	}
	store := secrets.Memory{"box-key": sb.Secrets[demo.KeySecret], "api-token": []byte(apiToken)}
	gw := New(context.Background(), Options{Config: cfg, Secrets: store})
	if _, err := gw.Config(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return &fixture{gw: gw, cfg: cfg, api: api, state: state, store: store, toml: toml}
}

func structured(t *testing.T, r *ToolResult) string {
	t.Helper()
	b, err := json.Marshal(r.Structured)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestGatewaySSHExec(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	r := f.gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "echo hello; echo oops >&2; exit 3"}, nil)
	out, ok := r.Structured.(*SSHExecOutput)
	if !ok {
		t.Fatalf("SSHExec: %s", r.Text)
	}
	if out.Status != "exited" || out.ExitCode == nil || *out.ExitCode != 3 || !r.IsError {
		t.Errorf("status %s exit %v isError %v; want exited 3 true", out.Status, out.ExitCode, r.IsError)
	}
	if out.Stdout.Head != "hello\n" || out.Stderr.Head != "oops\n" {
		t.Errorf("stdout %q stderr %q; want hello and oops kept apart", out.Stdout.Head, out.Stderr.Head)
	}
	if !strings.Contains(r.Text, "exit code 3") {
		t.Errorf("text %q should give the exit code", r.Text)
	}

	// A secret the command prints is redacted everywhere.
	r = f.gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "echo " + apiToken + "; echo " + apiToken + " | base64"}, nil)
	if s := structured(t, r) + r.Text; strings.Contains(s, apiToken) || !strings.Contains(s, "[REDACTED:api-token]") {
		t.Errorf("result leaks the secret or lacks the marker: %s", s)
	}

	// A second call reuses the connection and pages the output.
	r = f.gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "seq 1 200000"}, nil)
	out = r.Structured.(*SSHExecOutput)
	if !out.Stdout.Truncated || out.Stdout.Lines != 200000 {
		t.Fatalf("seq 1 200000: truncated %v lines %d; want true 200000", out.Stdout.Truncated, out.Stdout.Lines)
	}
	page := f.gw.ReadOutput(ctx, ReadOutputInput{Handle: out.Handle, Stream: "stdout", Offset: 0, Limit: 6})
	if p, ok := page.Structured.(*output.Page); !ok || p.Data != "1\n2\n3\n" {
		t.Errorf("read_output first 6 bytes: %s; want 1 2 3", page.Text)
	}
	page = f.gw.ReadOutput(ctx, ReadOutputInput{Handle: out.Handle, Stream: "stdout", Offset: -7, From: "end"})
	if p, ok := page.Structured.(*output.Page); !ok || p.Data != "200000\n" || !p.EOF {
		t.Errorf("read_output last 7 bytes: %s; want 200000 and eof", page.Text)
	}
	found := f.gw.SearchOutput(ctx, SearchOutputInput{Handle: out.Handle, Stream: "stdout", Pattern: "^19999[0-9]$", MaxMatches: 3})
	if s, ok := found.Structured.(*output.SearchResult); !ok || len(s.Matches) != 3 || s.Matches[0].Line != 199990 {
		t.Errorf("search_output: %s; want 3 matches from line 199990", found.Text)
	}
	if r := f.gw.ReadOutput(ctx, ReadOutputInput{Handle: "nope", Stream: "stdout"}); !r.IsError {
		t.Errorf("read_output of a bad handle: isError false; want a tool error")
	}
}

func TestGatewayRefusals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tests := []struct {
		name string
		run  func() *ToolResult
		want []string
	}{
		{"unknown target", func() *ToolResult {
			return f.gw.SSHExec(ctx, SSHExecInput{Target: "web9", Command: "true"}, nil)
		}, []string{`unknown SSH target "web9"`, "box", "nokey", "single"}},
		{"denied command", func() *ToolResult {
			return f.gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "sudo reboot"}, nil)
		}, []string{"denied by policy", `"box"`, "deny_commands[0]"}},
		{"missing secret", func() *ToolResult {
			return f.gw.SSHExec(ctx, SSHExecInput{Target: "nokey", Command: "true"}, nil)
		}, []string{`"missing-key"`, "actiongw secret set missing-key"}},
		{"unknown endpoint", func() *ToolResult {
			return f.gw.HTTPRequest(ctx, HTTPRequestInput{Endpoint: "x", Method: "GET", Path: "/"}, nil)
		}, []string{`unknown HTTP endpoint "x"`, "api"}},
		{"method not allowed", func() *ToolResult {
			return f.gw.HTTPRequest(ctx, HTTPRequestInput{Endpoint: "api", Method: "DELETE", Path: "/"}, nil)
		}, []string{"denied by policy", "DELETE"}},
		{"stdin too large", func() *ToolResult {
			return f.gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "cat", Stdin: strings.Repeat("x", 2<<20)}, nil)
		}, []string{"max_stdin_bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.run()
			if !r.IsError {
				t.Fatalf("isError false; want a tool error (text %q)", r.Text)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.Text, w) {
					t.Errorf("text %q; want it to contain %q", r.Text, w)
				}
			}
		})
	}
	log := readAudit(t, f)
	if !strings.Contains(log, `"decision":"deny","rule":"deny_commands[0] \"reboot\""`) {
		t.Errorf("the denial is not audited with its rule:\n%s", log)
	}
}

func readAudit(t *testing.T, f *fixture) string {
	t.Helper()
	path := audit.Path(f.cfg.Server.StateDir)
	if _, err := audit.Verify(path); err != nil {
		t.Fatalf("audit chain: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestGatewayHTTPRedactsEchoedCredential(t *testing.T) {
	f := newFixture(t)
	r := f.gw.HTTPRequest(context.Background(), HTTPRequestInput{Endpoint: "api", Method: "GET", Path: "/v1/items", Query: map[string]string{"q": "x"}}, nil)
	out, ok := r.Structured.(*HTTPRequestOutput)
	if !ok || r.IsError {
		t.Fatalf("http_request: %s", r.Text)
	}
	if out.HTTPStatus != 200 || out.Attempts != 1 {
		t.Errorf("http %d attempts %d; want 200 1", out.HTTPStatus, out.Attempts)
	}
	want := "path=/v1/items auth=Bearer [REDACTED:api-token]\n"
	if out.Body.Head != want {
		t.Errorf("body %q; want %q", out.Body.Head, want)
	}
	if got := out.Headers["x-request-id"]; got != "echo:Bearer [REDACTED:api-token]" {
		t.Errorf("echoed header %q; want it redacted", got)
	}
	all := structured(t, r) + r.Text + readAudit(t, f)
	if strings.Contains(all, apiToken) {
		t.Errorf("the credential leaked into the result or the audit log")
	}
}

func TestGatewayAuditsEveryAction(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "echo " + apiToken}, nil)
	f.gw.HTTPRequest(ctx, HTTPRequestInput{Endpoint: "api", Method: "POST", Path: "/x", JSON: map[string]any{"a": 1}}, nil)
	log := readAudit(t, f)
	if strings.Contains(log, apiToken) {
		t.Errorf("audit log holds the secret:\n%s", log)
	}
	for _, want := range []string{`"kind":"intent"`, `"kind":"outcome"`, `"command":"echo [REDACTED:api-token]"`, `"method":"POST","path":"/x"`, `"http_status":200`, `"stdout":{"bytes":`} {
		if !strings.Contains(log, want) {
			t.Errorf("audit log lacks %s:\n%s", want, log)
		}
	}
	if n := strings.Count(log, "\n"); n != 5 {
		t.Errorf("audit log has %d records; want 5 (the key record, then intent and outcome of two actions)", n)
	}
}

// runSleeper starts a command on target that writes its pid and sleeps,
// and returns the pid and the channel its result arrives on.
func runSleeper(t *testing.T, gw *Gateway, ctx context.Context, target string) (int, <-chan *ToolResult) {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "pid")
	done := make(chan *ToolResult, 1)
	go func() {
		done <- gw.SSHExec(ctx, SSHExecInput{Target: target, Command: "echo $$ > " + pidFile + "; exec sleep 60"}, nil)
	}()
	return sshtest.ReadPID(t, pidFile, 30*time.Second), done
}

func TestGatewayBusy(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	pid, first := runSleeper(t, f.gw, ctx, "single")
	// The sleeper holds single's one slot: a second call waits queue_wait
	// for it and gives up.
	r := f.gw.SSHExec(context.Background(), SSHExecInput{Target: "single", Command: "true"}, nil)
	if !r.IsError || !strings.Contains(r.Text, "busy") {
		t.Errorf("second call on a full target: %q; want a busy error", r.Text)
	}
	// Another target is not held up.
	if r := f.gw.SSHExec(context.Background(), SSHExecInput{Target: "box", Command: "true"}, nil); r.IsError {
		t.Errorf("call to another SSH target: %s", r.Text)
	}
	if r := f.gw.HTTPRequest(context.Background(), HTTPRequestInput{Endpoint: "api", Method: "GET", Path: "/"}, nil); r.IsError {
		t.Errorf("call to an HTTP endpoint: %s", r.Text)
	}
	cancel(errors.New("test: done with the sleeper"))
	if out := (<-first).Structured.(*SSHExecOutput); out.Status != "cancelled" {
		t.Errorf("the sleeper: status %s; want cancelled", out.Status)
	}
	if !sshtest.WaitGone(pid, 30*time.Second) {
		t.Errorf("the sleeper %d still runs after its cancel", pid)
	}
	// Its slot is free again.
	if r := f.gw.SSHExec(context.Background(), SSHExecInput{Target: "single", Command: "true"}, nil); r.IsError {
		t.Errorf("call after the slot was freed: %s", r.Text)
	}
}

func TestGatewayCloseCancelsRunningActions(t *testing.T) {
	f := newFixture(t)
	pid, done := runSleeper(t, f.gw, context.Background(), "box")
	if err := f.gw.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	r := <-done
	out := r.Structured.(*SSHExecOutput)
	if out.Status != "cancelled" || !strings.Contains(out.Reason, "shutting down") {
		t.Errorf("status %s reason %q; want cancelled by shutdown", out.Status, out.Reason)
	}
	if !sshtest.WaitGone(pid, 30*time.Second) {
		t.Errorf("remote sleep %d still running after Close", pid)
	}
	if out.RemoteStopped == nil || !*out.RemoteStopped {
		t.Errorf("remote_stopped %v; want true", out.RemoteStopped)
	}
	if log := readAudit(t, f); !strings.Contains(log, `"status":"cancelled"`) {
		t.Errorf("no cancelled outcome in the audit log:\n%s", log)
	}
}

func TestGatewayRedactsEchoedBasicAuth(t *testing.T) {
	f := newFixture(t)
	r := f.gw.HTTPRequest(context.Background(), HTTPRequestInput{Endpoint: "basic", Method: "GET", Path: "/"}, nil)
	out, ok := r.Structured.(*HTTPRequestOutput)
	if !ok {
		t.Fatalf("http_request: %s", r.Text)
	}
	// The server echoes "Basic base64(deploy:<password>)"; base64 is
	// matched unpadded, so padding may follow the marker.
	encoded := base64.StdEncoding.EncodeToString([]byte("deploy:" + apiToken))
	if !strings.HasPrefix(out.Body.Head, "path=/ auth=Basic [REDACTED:api-token]") || strings.Contains(out.Body.Head, strings.TrimRight(encoded, "=")) {
		t.Errorf("body %q; want the Basic credential redacted", out.Body.Head)
	}
}
