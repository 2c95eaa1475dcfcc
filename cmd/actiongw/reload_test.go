//go:build linux

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/mcpserver/mcphost"
)

// secretSet runs `actiongw secret set name` with value on stdin, in s's
// keyring, as a person would while serve runs.
func (s *served) secretSet(t *testing.T, name, value string) {
	t.Helper()
	cmd := exec.Command(actiongwBinary(t), "secret", "set", name)
	cmd.Env, cmd.Stdin = s.env, strings.NewReader(value)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("secret set %s: %v\n%s", name, err, out)
	}
}

// until calls a tool on c until ok accepts its result, and returns that
// result; it fails the test with the last one after a generous deadline.
func until(t *testing.T, c *mcphost.Client, what, tool string, args map[string]any, ok func(r *mcp.CallToolResult) bool) *mcp.CallToolResult {
	t.Helper()
	var last *mcp.CallToolResult
	if !testenv.Eventually(60*time.Second, func() bool {
		last = callOn(t, c, tool, args)
		return ok(last)
	}) {
		t.Fatalf("%s: never happened; last %s result: %s", what, tool, resultText(last))
	}
	return last
}

// TestServeReloadsSecrets: a secret missing at start, then stored with
// `actiongw secret set`, is used without a restart; a secret replaced in
// the keyring is used after SIGHUP; neither value ever reaches the agent.
func TestServeReloadsSecrets(t *testing.T) {
	var want atomic.Value // the token the API accepts now
	want.Store("")
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+want.Load().(string) {
			fmt.Fprintln(w, "token accepted")
			return
		}
		http.Error(w, "wrong token", http.StatusUnauthorized)
	}))
	defer api.Close()
	name := "rot-" + randomHex(t, 4)
	s := startServedWith(t, servedOptions{tables: fmt.Sprintf(`
[http.rot]
base_url = %q
auth = "bearer"
token_secret = %q
allow_private = true
`, api.URL, name)})
	t.Cleanup(func() { s.keyring.Delete(context.Background(), name) })
	get := map[string]any{"endpoint": "rot", "method": "GET", "path": "/"}

	r := s.call(t, "http_request", get)
	if text := resultText(r); !r.IsError || !strings.Contains(text, "actiongw secret set "+name) {
		t.Fatalf("with the secret missing: %s", text)
	}

	first, second := "first-"+randomHex(t, 12), "second-"+randomHex(t, 12)
	want.Store(first)
	s.secretSet(t, name, first)
	until(t, s.client, "the secret stored after start to be used", "http_request", get, func(r *mcp.CallToolResult) bool { return !r.IsError })

	// A replaced value is read again on SIGHUP.
	want.Store(second)
	s.secretSet(t, name, second)
	if err := syscall.Kill(s.client.Pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	until(t, s.client, "the replaced secret to be used after SIGHUP", "http_request", get, func(r *mcp.CallToolResult) bool { return !r.IsError })

	// The old value stays known to the redactor: echo both.
	r = s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "echo " + first + " " + second})
	if text := resultText(r); !strings.Contains(text, "[REDACTED:"+name+"] [REDACTED:"+name+"]") {
		t.Errorf("echoed old and new values: %s", text)
	}
	s.client.Close()
	s.assertNoSecretIn(t, first)
	s.assertNoSecretIn(t, second)
}

// TestServeBrokenConfig: serve starts with a config that does not load,
// answers every tool with the reason and the command that shows it, and
// takes the fixed file without a restart; a later broken edit keeps the
// working config, and the next result says so.
func TestServeBrokenConfig(t *testing.T) {
	s := startServedWith(t, servedOptions{})
	good, err := os.ReadFile(s.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(good), `stop_mode = "signal"`, "stop_mode = \"signal\"\ntimeout = \"60\"", 1)
	if err := os.WriteFile(s.cfgPath, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr := &syncbuf.Buffer{}
	c := s.startServer(t, stderr)

	r := callOn(t, c, "list_targets", nil)
	if text := resultText(r); !r.IsError || !strings.Contains(text, "configuration cannot be used") || !strings.Contains(text, "ssh.box.timeout") {
		t.Errorf("list_targets with a broken config: %s", text)
	}
	r = callOn(t, c, "ssh_exec", map[string]any{"target": "box", "command": "echo hi"})
	for _, want := range []string{"configuration cannot be used", "ssh.box.timeout", `"60s"`, "actiongw check", "again when it changes"} {
		if text := resultText(r); !r.IsError || !strings.Contains(text, want) {
			t.Errorf("ssh_exec with a broken config: %q lacks %q", text, want)
		}
	}
	if h := callOn(t, c, "health", nil); h.IsError {
		t.Errorf("health with a broken config: %s", resultText(h))
	}

	// Fixed in place: taken without a restart.
	if err := os.WriteFile(s.cfgPath, good, 0o600); err != nil {
		t.Fatal(err)
	}
	until(t, c, "the fixed config to be taken", "ssh_exec", map[string]any{"target": "box", "command": "echo fixed"},
		func(r *mcp.CallToolResult) bool { return !r.IsError })

	// Broken again by a rename over it (as editors save): the working
	// config stays, and the next result says why the new one was not taken.
	tmp := s.cfgPath + ".new"
	if err := os.WriteFile(tmp, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, s.cfgPath); err != nil {
		t.Fatal(err)
	}
	r = until(t, c, "the failed reload to be reported", "list_targets", nil, func(r *mcp.CallToolResult) bool {
		return strings.Contains(resultText(r), "previous configuration is still in effect")
	})
	if r.IsError {
		t.Errorf("list_targets after a failed reload: %s", resultText(r))
	}
	r = callOn(t, c, "ssh_exec", map[string]any{"target": "box", "command": "echo still"})
	if text := resultText(r); r.IsError || strings.Contains(text, "previous configuration") {
		t.Errorf("after the failed reload was reported once: %s", text)
	}
	if !strings.Contains(stderr.String(), "could not be reloaded") {
		t.Errorf("the failed reload is not in the log:\n%s", stderr)
	}
}
