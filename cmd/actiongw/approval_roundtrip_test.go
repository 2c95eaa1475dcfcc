//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// roundTripClient connects a go-sdk client at 2026-07-28 that returns
// questions to the test instead of answering them (it declares
// elicitation, and its handler is never called), and returns its call.
func roundTripClient(t *testing.T, s *served, cfgPath string) func(p *mcp.CallToolParams) *mcp.CallToolResult {
	t.Helper()
	stderr := &syncbuf.Buffer{}
	cmd := exec.Command(actiongwBinary(t), "serve", "-config", cfgPath)
	cmd.Env, cmd.Stderr = s.env, stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "round-trip-test", Version: "1"}, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, fmt.Errorf("not asked this way")
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	t.Cleanup(func() { cs.Close() })
	return func(p *mcp.CallToolParams) *mcp.CallToolResult {
		t.Helper()
		r, err := cs.CallTool(ctx, p)
		if err != nil {
			t.Fatalf("call: %v\n%s", err, stderr)
		}
		return r
	}
}

// TestServeApprovalsFanOutHostKey: at protocol 2026-07-28 a question goes
// back with the call's result and the call comes again; a fan-out whose
// target would ask about its first-use host key would then run on its
// other targets twice. That target fails alone instead, saying how to ask
// (ssh_exec on it first), and the command runs once on each other target.
func TestServeApprovalsFanOutHostKey(t *testing.T) {
	s := startApprovals(t, "")
	for _, other := range []string{"box", "always"} {
		t.Run(other, func(t *testing.T) {
			dir := t.TempDir()
			b, err := os.ReadFile(s.cfgPath)
			if err != nil {
				t.Fatal(err)
			}
			extra := fmt.Sprintf("[ssh.fresh]\nhost = \"127.0.0.1\"\nport = %d\nuser = %q\nkey_secret = \"box-key\"\nknown_hosts = %q\nhost_key_policy = \"ask\"\n[group.fan]\ntargets = [%q, \"fresh\"]\n",
				s.sshd.Port, s.sshd.User, filepath.Join(dir, "known_hosts"), other)
			cfg := filepath.Join(dir, "config.toml")
			if err := os.WriteFile(cfg, append(b, extra...), 0o600); err != nil {
				t.Fatal(err)
			}
			call := roundTripClient(t, s, cfg)
			count := filepath.Join(s.userDir, "fan-runs-"+other)
			args := map[string]any{"group": "fan", "command": "echo run >> " + count}
			runs := func() int {
				b, _ := os.ReadFile(count)
				return strings.Count(string(b), "run\n")
			}
			r := call(&mcp.CallToolParams{Name: "ssh_exec_many", Arguments: args})
			for rounds := 0; r.NeedsInput(); rounds++ {
				if rounds == 2 {
					t.Fatalf("still asking after %d answers", rounds)
				}
				if n := runs(); n != 0 {
					t.Errorf("a call returned a question, yet the command ran %d times so far", n)
				}
				answers := mcp.InputResponseMap{}
				for id := range r.InputRequests {
					answers[id] = decided("approve")
				}
				r = call(&mcp.CallToolParams{Name: "ssh_exec_many", Arguments: args, InputResponses: answers, RequestState: r.RequestState})
			}
			out := decode[gateway.SSHExecManyOutput](t, r)
			if out.Summary.ExitedOK != 1 || !strings.Contains(resultText(r), "ssh_exec on fresh") {
				t.Errorf("fan-out: %s; want one target done and fresh refused, saying how to ask", resultText(r))
			}
			if n := runs(); n != 1 {
				t.Errorf("the command ran %d times; want once, on %s", n, other)
			}
			var fans int
			for _, r := range auditRecords(t, s.state) {
				if r.Kind == audit.KindIntent && r.Tool == "ssh_exec_many" && r.Command == args["command"] {
					fans++
				}
			}
			if fans != 1 {
				t.Errorf("%d ssh_exec_many intents for one call; want 1", fans)
			}
		})
	}
}

// TestServeApprovalsRoundTripReload: at protocol 2026-07-28 the person
// is shown a POST to the endpoint's base URL; before the call comes back
// with the approval, a reload points the endpoint at another server. The
// answer was for the old one: the call asks again.
func TestServeApprovalsRoundTripReload(t *testing.T) {
	s := startApprovals(t, "")
	var oldHits, newHits atomic.Int32
	oldAPI := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { oldHits.Add(1) }))
	t.Cleanup(oldAPI.Close)
	newAPI := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { newHits.Add(1) }))
	t.Cleanup(newAPI.Close)
	b, err := os.ReadFile(s.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	deploy := "[http.deploy]\nbase_url = %q\nmethods = [\"POST\"]\napprove_methods = [\"POST\"]\nallow_private = true\n"
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, append(b, fmt.Sprintf(deploy, oldAPI.URL)...), 0o600); err != nil {
		t.Fatal(err)
	}
	call := roundTripClient(t, s, cfg)
	args := map[string]any{"endpoint": "deploy", "method": "POST", "path": "/release", "body": "v2"}

	first := call(&mcp.CallToolParams{Name: "http_request", Arguments: args})
	if !first.NeedsInput() {
		t.Fatalf("first call: %+v; want a question", first)
	}
	answers := mcp.InputResponseMap{}
	for id, q := range first.InputRequests {
		if ep, ok := q.(*mcp.ElicitParams); !ok || !strings.Contains(ep.Message, oldAPI.URL) {
			t.Fatalf("question: %+v; want the old base URL shown", q)
		}
		answers[id] = decided("approve")
	}

	if err := os.WriteFile(cfg, append(b, fmt.Sprintf(deploy, newAPI.URL)...), 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, "the reload to the new server", func() bool {
		r := call(&mcp.CallToolParams{Name: "list_targets", Arguments: map[string]any{}})
		raw, _ := json.Marshal(r.StructuredContent)
		return strings.Contains(string(raw), newAPI.URL)
	})

	r := call(&mcp.CallToolParams{Name: "http_request", Arguments: args, InputResponses: answers, RequestState: first.RequestState})
	if !r.NeedsInput() || newHits.Load() != 0 {
		t.Errorf("the answer to a question that showed %s: got %s (question %v), new server %s hit %d times; want a new question",
			oldAPI.URL, resultText(r), r.NeedsInput(), newAPI.URL, newHits.Load())
	}
}

// TestServeApprovalsRoundTripRecorded: at protocol 2026-07-28 a call
// that asks about its command (answered approve_for) and then about a
// first-use host key comes back three times; its intent records the
// person's answers, not "remembered".
func TestServeApprovalsRoundTripRecorded(t *testing.T) {
	s := startApprovals(t, "")
	dir := t.TempDir()
	b, err := os.ReadFile(s.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	extra := fmt.Sprintf("[ssh.fresh]\nhost = \"127.0.0.1\"\nport = %d\nuser = %q\nkey_secret = \"box-key\"\nknown_hosts = %q\nhost_key_policy = \"ask\"\napprove = \"always\"\n",
		s.sshd.Port, s.sshd.User, filepath.Join(dir, "known_hosts"))
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, append(b, extra...), 0o600); err != nil {
		t.Fatal(err)
	}
	call := roundTripClient(t, s, cfg)
	args := map[string]any{"target": "fresh", "command": "echo approved-for-a-while"}
	r := call(&mcp.CallToolParams{Name: "ssh_exec", Arguments: args})
	for rounds := 0; r.NeedsInput(); rounds++ {
		if rounds == 3 {
			t.Fatalf("still asking after %d answers", rounds)
		}
		answers := mcp.InputResponseMap{}
		for id, q := range r.InputRequests {
			d := "approve"
			if strings.Contains(q.(*mcp.ElicitParams).Message, "Run this command") {
				d = "approve_for"
			}
			answers[id] = decided(d)
		}
		r = call(&mcp.CallToolParams{Name: "ssh_exec", Arguments: args, InputResponses: answers, RequestState: r.RequestState})
	}
	if r.IsError {
		t.Fatalf("answered: %s", resultText(r))
	}
	in := intentOf(t, s.state, "echo approved-for-a-while")
	var asked []string
	for _, a := range in.Approvals {
		asked = append(asked, a.Asked+":"+a.Answer)
	}
	if !slices.Equal(asked, []string{"command:approve_for", "host_key:approve"}) {
		t.Errorf("approvals recorded: %q; want the person's answers", asked)
	}
}
