//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// tsSDK is the version of the TypeScript MCP SDK that .ci/run installs.
const tsSDK = "@modelcontextprotocol/sdk@1.32.2"

// tsSDKRoot returns npm's global root, where .ci/run installs the
// TypeScript SDK, for NODE_PATH; it ends t when node or the SDK is
// missing.
func tsSDKRoot(t *testing.T) string {
	missing := func() {
		testenv.Missing(t, "the TypeScript MCP SDK", "install Node.js and npm, then npm install -g "+tsSDK+", "+testenv.Setup)
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing()
	}
	out, err := exec.Command("npm", "root", "-g").Output()
	if err != nil {
		missing()
	}
	root := strings.TrimSpace(string(out))
	if _, err := os.Stat(filepath.Join(root, "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		missing()
	}
	return root
}

// tsRun is what testdata/elicit-client.cjs printed.
type tsRun struct {
	protocol  string
	questions []string
	withdrawn []string
	results   []*mcp.CallToolResult
}

// tsClient runs testdata/elicit-client.cjs against `actiongw serve
// -config cfgPath` in s's environment: answers (nil: a client that
// declares no elicitation support) for its questions, and calls.
func tsClient(t *testing.T, s *served, nodePath, cfgPath string, answers []any, calls []map[string]any) tsRun {
	t.Helper()
	spec, err := json.Marshal(map[string]any{
		"command":     actiongwBinary(t),
		"args":        []string{"serve", "-config", cfgPath},
		"elicitation": answers != nil,
		"answers":     answers,
		"calls":       calls,
	})
	if err != nil {
		t.Fatal(err)
	}
	out, stderr := nodeOutput(t, append(s.env, "NODE_PATH="+nodePath), "node", filepath.Join("testdata", "elicit-client.cjs"), string(spec))
	var run tsRun
	lines := bufio.NewScanner(bytes.NewReader(out))
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		var line struct {
			Protocol  string              `json:"protocol"`
			Question  *string             `json:"question"`
			Withdrawn *string             `json:"withdrawn"`
			Result    *mcp.CallToolResult `json:"result"`
		}
		if err := json.Unmarshal(lines.Bytes(), &line); err != nil {
			t.Fatalf("elicit-client printed %q: %v", lines.Text(), err)
		}
		switch {
		case line.Protocol != "":
			run.protocol = line.Protocol
		case line.Question != nil:
			run.questions = append(run.questions, *line.Question)
		case line.Withdrawn != nil:
			run.withdrawn = append(run.withdrawn, *line.Withdrawn)
		case line.Result != nil:
			run.results = append(run.results, line.Result)
		}
	}
	if len(run.results) != len(calls) {
		t.Fatalf("elicit-client printed %d results for %d calls:\n%s\nstderr:\n%s", len(run.results), len(calls), out, stderr)
	}
	// serve's log (its stderr, which the client passes on) says why a
	// result is not what the test wants: a keyring it could not read.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("elicit-client's stderr, with serve's log (its end):\n%s", stderr[max(0, len(stderr)-8<<10):])
		}
	})
	return run
}

// TestServeApprovalsTypeScript asks the person at a client written by
// others: the TypeScript SDK's, at its protocol 2025-11-25, where the
// server sends elicitation/create while the call waits.
func TestServeApprovalsTypeScript(t *testing.T) {
	nodePath := tsSDKRoot(t)
	s := startApprovals(t, "")
	hurried := withTimeout(t, s, "1ns")
	// The markers go where the login user can write: an approved touch
	// must be able to make its file.
	markers := s.sshd.UserDir(t)
	approve := map[string]any{"action": "accept", "content": map[string]any{"decision": "approve"}}
	cases := []struct {
		name    string
		cfgPath string
		answers []any // nil: the client declares no elicitation support
		// wantAnswer is the answer the intent records; only "approve"
		// lets the command run.
		wantAnswer string
		wantText   []string // in the result's text
	}{
		{"approve", s.cfgPath, []any{approve}, "approve", []string{"exited"}},
		{"decline", s.cfgPath, []any{map[string]any{"action": "decline"}}, "decline", []string{"person at the client declined"}},
		{"cancel", s.cfgPath, []any{map[string]any{"action": "cancel"}}, "cancel", []string{"person at the client dismissed"}},
		{"no-elicitation", s.cfgPath, nil, "unavailable", []string{"(approve)", "declared no elicitation support"}},
		// The question may be given up before it reaches the client; one
		// that does is withdrawn (notifications/cancelled).
		{"timeout", hurried, []any{"wait"}, "timeout", []string{"no answer within 1ns"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			marker := filepath.Join(markers, c.name)
			cmd := "touch " + marker
			run := tsClient(t, s, nodePath, c.cfgPath, c.answers, []map[string]any{
				{"name": "ssh_exec", "arguments": map[string]any{"target": "always", "command": cmd}},
			})
			if run.protocol != "2025-11-25" {
				t.Errorf("got protocol %q; want 2025-11-25, where the server sends elicitation/create", run.protocol)
			}
			r := run.results[0]
			for _, want := range c.wantText {
				if !strings.Contains(resultText(r), want) {
					t.Errorf("got result %q; want it to hold %q", resultText(r), want)
				}
			}
			_, err := os.Stat(marker)
			if ran, wantRan := err == nil, c.wantAnswer == "approve"; ran != wantRan || r.IsError == wantRan {
				t.Errorf("got ran %v, error result %v; want ran %v", ran, r.IsError, wantRan)
			}
			switch {
			case c.answers == nil:
				if len(run.questions) != 0 {
					t.Errorf("a client without elicitation was asked %q", run.questions)
				}
			case c.answers[0] == "wait":
				if !slices.Equal(run.withdrawn, run.questions) {
					t.Errorf("got questions %q, withdrawn %q; want each question that went unanswered withdrawn", run.questions, run.withdrawn)
				}
			case len(run.questions) != 1 || !strings.Contains(run.questions[0], cmd) || !strings.Contains(run.questions[0], `"always"`):
				t.Errorf("got questions %q; want one naming the target and the command", run.questions)
			}

			in := intentOf(t, s.state, cmd)
			out := outcomeOfHandle(t, s.state, in)
			if len(in.Approvals) != 1 || in.Approvals[0].Answer != c.wantAnswer || in.Approvals[0].Asked != "command" {
				t.Errorf("got intent approvals %+v; want one for the command, answered %q", in.Approvals, c.wantAnswer)
			}
			if c.wantAnswer == "approve" {
				if in.Decision != "allow" || out.Status != "exited" {
					t.Errorf("got intent decision %q, outcome status %q; want allow and exited", in.Decision, out.Status)
				}
				return
			}
			if in.Decision != "deny" || in.Rule != "approve" || out.Status != "denied" || out.Rule != "approve" {
				t.Errorf("got intent %s under rule %q, outcome %s under rule %q; want deny and denied under rule approve",
					in.Decision, in.Rule, out.Status, out.Rule)
			}
		})
	}

	// A first-use host key, trusted, is verified on the next call
	// without a question; a changed one is refused without one.
	t.Run("host-key", func(t *testing.T) {
		dir := t.TempDir()
		fresh, changed := filepath.Join(dir, "known_hosts"), filepath.Join(dir, "changed")
		_, other := sshtest.NewKey(t)
		if err := os.WriteFile(changed, []byte(s.sshd.KnownHostsLine(other.PublicKey())+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(s.cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(dir, "config.toml")
		extra := strings.ReplaceAll(fleetTarget("fresh", `host_key_policy = "ask"`), "@KNOWN_HOSTS@", fresh) +
			strings.ReplaceAll(fleetTarget("changed", `host_key_policy = "ask"`), "@KNOWN_HOSTS@", changed)
		extra = strings.NewReplacer("@PORT@", fmt.Sprint(s.sshd.Port), "@USER@", s.sshd.User).Replace(extra)
		if err := os.WriteFile(cfg, append(b, extra...), 0o600); err != nil {
			t.Fatal(err)
		}
		run := tsClient(t, s, nodePath, cfg, []any{approve}, []map[string]any{
			{"name": "ssh_exec", "arguments": map[string]any{"target": "fresh", "command": "echo ts-first"}},
			{"name": "ssh_exec", "arguments": map[string]any{"target": "fresh", "command": "echo ts-second"}},
			{"name": "ssh_exec", "arguments": map[string]any{"target": "changed", "command": "echo ts-changed"}},
		})
		if r := run.results[0]; r.IsError {
			t.Errorf("first use: %s", resultText(r))
		}
		if r := run.results[1]; r.IsError {
			t.Errorf("next call: %s", resultText(r))
		}
		if r := run.results[2]; !r.IsError || !strings.Contains(resultText(r), "changed") {
			t.Errorf("changed key: %s; want it refused", resultText(r))
		}
		if len(run.questions) != 1 || !strings.Contains(run.questions[0], s.sshd.Fingerprint()) {
			t.Errorf("got questions %q; want one, showing the fingerprint %s", run.questions, s.sshd.Fingerprint())
		}
		if in := intentOf(t, s.state, "echo ts-first"); len(in.Approvals) != 1 || in.Approvals[0].Asked != "host_key" || in.Approvals[0].Answer != "approve" {
			t.Errorf("got intent approvals %+v; want the host key approved", in.Approvals)
		}
	})

	// A POST asks too, through the same client; the question shows the
	// request, never the token the gateway adds.
	t.Run("post", func(t *testing.T) {
		run := tsClient(t, s, nodePath, s.cfgPath, []any{approve}, []map[string]any{
			{"name": "http_request", "arguments": map[string]any{"endpoint": "post", "method": "POST", "path": "/ts-post", "body": `{"from":"typescript"}`}},
		})
		if r := run.results[0]; r.IsError || s.began("/ts-post") != 1 {
			t.Errorf("got result %q, %d requests at the API; want the POST sent once", resultText(r), s.began("/ts-post"))
		}
		if len(run.questions) != 1 || !strings.Contains(run.questions[0], "POST /ts-post") || !strings.Contains(run.questions[0], `{"from":"typescript"}`) ||
			strings.Contains(run.questions[0], s.token) {
			t.Errorf("got questions %q; want one showing the POST and its body, without the token", run.questions)
		}
		if in := intentOf(t, s.state, "/ts-post"); len(in.Approvals) != 1 || in.Approvals[0].Asked != "request" || in.Approvals[0].Answer != "approve" {
			t.Errorf("got intent approvals %+v; want the request approved", in.Approvals)
		}
	})
}
