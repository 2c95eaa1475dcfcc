package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/internal/sshtest"
	"github.com/actiongw/actiongw/secrets"
)

const apiToken = "tok-3f9a8b7c6d5e4f"

type fixture struct {
	gw    *Gateway
	cfg   *config.Config
	sshd  *sshtest.Server
	api   *httptest.Server
	state string
}

// newFixture starts a real sshd and a loopback HTTP server that echoes the
// Authorization header, and a gateway configured for both.
func newFixture(t *testing.T, extra string) *fixture {
	t.Helper()
	sshd := sshtest.Start(t, sshtest.Options{})
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "echo:"+r.Header.Get("Authorization"))
		fmt.Fprintf(w, "path=%s auth=%s\n", r.URL.Path, r.Header.Get("Authorization"))
	}))
	t.Cleanup(api.Close)
	state := t.TempDir()
	toml := fmt.Sprintf(`
[server]
state_dir = %q
queue_wait = "300ms"
[ssh.box]
host = "127.0.0.1"
port = %d
user = %q
key_secret = "box-key"
known_hosts = %q
deny_commands = ["reboot"]
[ssh.nokey]
host = "127.0.0.1"
port = %d
user = %q
key_secret = "missing-key"
known_hosts = %q
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
%s`, state, sshd.Port, sshd.User, sshd.KnownHosts, sshd.Port, sshd.User, sshd.KnownHosts, api.URL, api.URL, extra)
	cfg, err := config.Parse([]byte(toml))
	if err != nil {
		t.Fatal(err)
	}
	store := secrets.Memory{"box-key": sshd.ClientKey, "api-token": []byte(apiToken)}
	gw, err := New(context.Background(), Options{Config: cfg, Secrets: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return &fixture{gw: gw, cfg: cfg, sshd: sshd, api: api, state: state}
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
	f := newFixture(t, "")
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
	f := newFixture(t, "")
	ctx := context.Background()
	tests := []struct {
		name string
		run  func() *ToolResult
		want []string
	}{
		{"unknown target", func() *ToolResult {
			return f.gw.SSHExec(ctx, SSHExecInput{Target: "web9", Command: "true"}, nil)
		}, []string{`unknown SSH target "web9"`, "box", "nokey"}},
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
	f := newFixture(t, "")
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
	f := newFixture(t, "")
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

func TestGatewayBusy(t *testing.T) {
	f := newFixture(t, "")
	f.gw.limit = newLimiter(16, map[string]int{"box": 1}, 300*time.Millisecond)
	ctx := context.Background()
	var wg sync.WaitGroup
	started := make(chan struct{})
	wg.Go(func() {
		close(started)
		f.gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "sleep 2"}, nil)
	})
	<-started
	time.Sleep(500 * time.Millisecond)
	r := f.gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "true"}, nil)
	if !r.IsError || !strings.Contains(r.Text, "busy") {
		t.Errorf("second call on a full target: %q; want a busy error", r.Text)
	}
	// Another target is not held up.
	if r := f.gw.HTTPRequest(ctx, HTTPRequestInput{Endpoint: "api", Method: "GET", Path: "/"}, nil); r.IsError {
		t.Errorf("call to another target: %s", r.Text)
	}
	wg.Wait()
}

func TestGatewayCloseCancelsRunningActions(t *testing.T) {
	f := newFixture(t, "")
	pidFile := filepath.Join("/tmp", fmt.Sprintf("gw-close-%d.pid", time.Now().UnixNano()))
	t.Cleanup(func() { os.Remove(pidFile) })
	done := make(chan *ToolResult)
	go func() {
		done <- f.gw.SSHExec(context.Background(), SSHExecInput{Target: "box", Command: "echo $$ > " + pidFile + "; exec sleep 60"}, nil)
	}()
	pid := sshtest.ReadPID(t, pidFile, 10*time.Second)
	if err := f.gw.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	r := <-done
	out := r.Structured.(*SSHExecOutput)
	if out.Status != "cancelled" || !strings.Contains(out.Reason, "shutting down") {
		t.Errorf("status %s reason %q; want cancelled by shutdown", out.Status, out.Reason)
	}
	if !sshtest.WaitGone(pid, 5*time.Second) {
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
	f := newFixture(t, "")
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
