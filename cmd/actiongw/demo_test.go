//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// freshEnv is an environment like a fresh machine's: no config, no state,
// no keyring (no session bus), with every writable place under root.
func freshEnv(t *testing.T, root string) []string {
	return slices.DeleteFunc(canaryEnv(t, root), func(kv string) bool {
		return strings.HasPrefix(kv, "DBUS_SESSION_BUS_ADDRESS=") || strings.HasPrefix(kv, "ACTIONGW_")
	})
}

// TestDemo runs `actiongw demo` as a person would on a fresh machine.
func TestDemo(t *testing.T) {
	bin := actiongwBinary(t)
	root := t.TempDir()
	cmd := exec.CommandContext(t.Context(), bin, "demo")
	cmd.Env = freshEnv(t, root)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("actiongw demo:\n%s", stdout.String())
	if err != nil {
		t.Fatalf("actiongw demo: %v\nstderr:\n%s", err, stderr.String())
	}
	for _, want := range []string{
		"listen on 127.0.0.1 only",
		"exist only in the\n    serve process's memory",
		"as you (user ",
		"1. initialize\n   server actiongw",
		"ssh  sandbox ",
		"http demo-api  http://127.0.0.1:",
		"$ seq 1 7000000\n",
		" received so far\n", // progress: the slow command runs a second at least
		"status exited, exit code 0",
		"stdout: 54.9 MB, 7000000 lines",
		"truncated: true, handle: out_",
		`last 32 bytes: "6999997⏎6999998⏎6999999⏎7000000⏎" (eof true)`,
		`pattern "^6543210$": 1 match, line 6543210, offset 51234568`,
		"| Authorization: Bearer [REDACTED:demo-api-token]\n",
		"sent notifications/cancelled",
		"audit log outcome: status cancelled, remote_stopped true",
		`$ echo still here  →  "still here\n", answered in `,
		"cancels received 1, responses dropped ",
		"returned at once: status running, handle out_",
		`read_output (wait_s 10) → "deploy step 3\n"`,
		"cancel_action → status cancelled, remote_stopped true",
		"the server asks the person at the client (elicitation/create):\n" +
			`     | actiongw: Send this request to HTTP endpoint "demo-api" (http://127.0.0.1:`,
		"     | POST /deploy\n",
		`     | {"service":"web","version":"1.4.2"}` + "\n     decision [approve | deny] → the person picks approve\n",
		`approved, so it was sent: HTTP 202 in `,
		`     | {"service":"web","version":"1.5.0-rc1"}` + "\n     decision [approve | deny] → the person picks deny\n",
		`not approved: the person at the client declined it (approve_methods of "demo-api")`,
		"audit log outcome: status denied, rule approve_methods, no HTTP status",
		"demo passed: 11 steps in ",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the transcript lacks %q", want)
		}
	}
	if strings.Count(stdout.String(), "   ok, ") != 11 {
		t.Errorf("got %d steps ok; want 11", strings.Count(stdout.String(), "   ok, "))
	}
	if stderr.Len() != 0 {
		t.Errorf("got stderr %q; want none when the demo passes", stderr.String())
	}
	// Nothing is left behind: the serve process's state and the demo's
	// own files were in the temporary directory.
	left, _ := os.ReadDir(root + "/tmp")
	if len(left) != 0 {
		t.Errorf("the demo left %v in TMPDIR", left)
	}
}

// A step that misbehaves makes the demo fail, naming the step.
func TestDemoFailureNamesTheStep(t *testing.T) {
	bin := actiongwBinary(t)
	cmd := exec.CommandContext(t.Context(), bin, "demo")
	// Without PATH the remote shell finds no seq: step 3 fails.
	cmd.Env = append(freshEnv(t, t.TempDir()), "PATH=/nonexistent")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("got %v; want exit status 1\nstdout:\n%s", err, stdout.String())
	}
	for _, want := range []string{
		"actiongw: demo failed: step 3 (ssh_exec: a command that prints about 55 MB): ssh_exec failed: ",
		"exited with exit code 127",
		"seq: not found", // the remote stderr
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("got stderr:\n%s\nwant it to hold %q", stderr.String(), want)
		}
	}
	if strings.Contains(stdout.String(), "demo passed") {
		t.Errorf("the transcript says the demo passed:\n%s", stdout.String())
	}
}

// TestServeDemoSDKClient: any MCP client can use `actiongw serve -demo`;
// here the go-sdk's own client over its CommandTransport.
func TestServeDemoSDKClient(t *testing.T) {
	bin := actiongwBinary(t)
	cmd := exec.Command(bin, "serve", "-demo")
	cmd.Env = freshEnv(t, t.TempDir())
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "sdk-demo-test", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	defer func() {
		if err := cs.Close(); err != nil {
			t.Errorf("close: %v\n%s", err, stderr.String())
		}
	}()
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if want := allTools; !slices.Equal(names, want) {
		t.Errorf("tools/list: got %v; want %v", names, want)
	}

	call := func(name string, args map[string]any, out any) {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.IsError {
			t.Fatalf("%s: got an error result %+v", name, res.Content)
		}
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	var targets struct {
		SSH  []struct{ Name, Host string } `json:"ssh"`
		HTTP []struct {
			Name    string `json:"name"`
			BaseURL string `json:"base_url"`
		} `json:"http"`
	}
	call("list_targets", map[string]any{}, &targets)
	if len(targets.SSH) != 1 || targets.SSH[0].Name != "sandbox" || targets.SSH[0].Host != "127.0.0.1" ||
		len(targets.HTTP) != 1 || targets.HTTP[0].Name != "demo-api" || !strings.HasPrefix(targets.HTTP[0].BaseURL, "http://127.0.0.1:") {
		t.Errorf("list_targets: got %+v; want sandbox and demo-api on 127.0.0.1", targets)
	}
	var ssh gateway.SSHExecOutput
	call("ssh_exec", map[string]any{"target": "sandbox", "command": "echo hi; id -un >&2"}, &ssh)
	if ssh.Status != "exited" || ssh.ExitCode == nil || *ssh.ExitCode != 0 || ssh.Stdout.Head != "hi\n" {
		t.Errorf("ssh_exec: got %+v; want exited 0 with stdout hi", ssh)
	}
	if me := os.Getenv("USER"); me != "" && ssh.Stderr.Head != me+"\n" {
		t.Errorf("ssh_exec ran as %q; want the current user %q", ssh.Stderr.Head, me)
	}
	var web gateway.HTTPRequestOutput
	call("http_request", map[string]any{"endpoint": "demo-api", "method": "GET", "path": "/echo"}, &web)
	if web.HTTPStatus != 200 || !strings.Contains(web.Body.Head, "Authorization: Bearer [REDACTED:demo-api-token]\n") {
		t.Errorf("http_request: got HTTP %d, body %q; want 200 with the token redacted", web.HTTPStatus, web.Body.Head)
	}
	// A POST asks the person at the client first; this client declared
	// no elicitation, so nobody can approve it and it is refused.
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "http_request", Arguments: map[string]any{
		"endpoint": "demo-api", "method": "POST", "path": "/deploy", "json": map[string]any{"service": "web", "version": "1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if text := resultText(res); !res.IsError || !strings.Contains(text, "(approve_methods)") || !strings.Contains(text, "no elicitation support") {
		t.Errorf("POST without a person to ask: got %q (error %v); want a refusal naming approve_methods", text, res.IsError)
	}
}

func TestServeDemoUsage(t *testing.T) {
	cases := []struct {
		cmd  string
		args []string
		want string
	}{
		{"serve", []string{"-demo", "-config", "x.toml"}, "-demo and -config are exclusive"},
		{"serve", []string{"-demo", "extra"}, `unexpected argument "extra"`},
		{"demo", []string{"extra"}, `unexpected argument "extra"`},
		{"demo", []string{"-config", "x.toml"}, "flag provided but not defined"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		cl := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
		err := cl.run(t.Context(), append([]string{c.cmd}, c.args...))
		var uerr *usageError
		if !errors.As(err, &uerr) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: got %v; want a usage error containing %q", c.cmd, c.args, err, c.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("%s %q: got stdout %q; want none", c.cmd, c.args, stdout.String())
		}
	}
}

// TestServeDemoInspector drives `actiongw serve -demo` with the MCP
// Inspector's command-line mode, a client written by others in another
// language. .ci/run installs it (npm install -g
// @modelcontextprotocol/inspector@0.15.0, the last release for Node 20).
func TestServeDemoInspector(t *testing.T) {
	if _, err := exec.LookPath("npx"); err != nil || !inspectorInstalled() {
		testenv.Missing(t, "the MCP Inspector", "install Node.js and npm, then npm install -g @modelcontextprotocol/inspector@0.15.0, "+testenv.Setup)
	}
	bin := actiongwBinary(t)
	env := freshEnv(t, t.TempDir())
	inspect := func(args ...string) []byte {
		t.Helper()
		// --no: use the installed package, never fetch one; "--" keeps npm
		// from taking --cli for its own option. npx runs the inspector
		// through a shell and node.
		out, _ := nodeOutput(t, env, "npx", append([]string{"--no", "--", "@modelcontextprotocol/inspector", "--cli", bin, "serve", "-demo"}, args...)...)
		return out
	}

	var list struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := json.Unmarshal(inspect("--method", "tools/list"), &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if want := allTools; !slices.Equal(names, want) {
		t.Errorf("tools/list: got %v; want %v", names, want)
	}

	var targets struct {
		IsError           bool `json:"isError"`
		StructuredContent struct {
			SSH []struct{ Name, Host string } `json:"ssh"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(inspect("--method", "tools/call", "--tool-name", "list_targets"), &targets); err != nil {
		t.Fatal(err)
	}
	if ssh := targets.StructuredContent.SSH; targets.IsError || len(ssh) != 1 || ssh[0].Name != "sandbox" || ssh[0].Host != "127.0.0.1" {
		t.Errorf("list_targets: got %+v; want the sandbox on 127.0.0.1", targets)
	}

	var run struct {
		IsError           bool                  `json:"isError"`
		StructuredContent gateway.SSHExecOutput `json:"structuredContent"`
	}
	if err := json.Unmarshal(inspect("--method", "tools/call", "--tool-name", "ssh_exec", "--tool-arg", "target=sandbox", "--tool-arg", "command=echo hi"), &run); err != nil {
		t.Fatal(err)
	}
	if out := run.StructuredContent; run.IsError || out.Status != "exited" || out.Stdout.Head != "hi\n" {
		t.Errorf("ssh_exec: got %+v; want exited with stdout hi", run)
	}
}

// inspectorInstalled reports whether npm has the MCP Inspector installed
// globally, so that npx runs it without fetching.
func inspectorInstalled() bool {
	return exec.Command("npm", "ls", "-g", "--depth=0", "@modelcontextprotocol/inspector").Run() == nil
}

// allTools is what tools/list gives, sorted.
var allTools = []string{"action_status", "cancel_action", "health", "http_request", "list_actions", "list_targets",
	"read_output", "search_output", "ssh_download", "ssh_exec", "ssh_exec_many", "ssh_session_send", "ssh_session_start", "ssh_upload"}

// nodeOutput runs a Node.js program (name and args) with env and returns
// its stdout and stderr, failing t when it fails. It runs in a process group of its
// own, which a timeout kills whole (node, the shells npx starts, and the
// serve process a client starts). Generous: node starts slowly on a loaded
// machine.
func nodeOutput(t *testing.T, env []string, name string, args ...string) (stdout []byte, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %q: %v\nstdout:\n%s\nstderr:\n%s", name, args, err, out, errOut.String())
	}
	return out, errOut.String()
}
