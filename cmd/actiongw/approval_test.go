//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/syncbuf"
	"github.com/actiongw/actiongw/mcpserver/mcphost"
)

// approvalTables are the targets the approval tests ask about: "ask"
// runs a listed command and asks for the rest (deny rules still deny),
// "always" asks for everything, "post" asks before a POST.
const approvalTables = `
[ssh.ask]
host = "127.0.0.1"
port = @PORT@
user = "@USER@"
key_secret = "box-key"
known_hosts = "@KNOWN_HOSTS@"
approve = "unlisted"
allow_commands = ["echo listed"]
deny_commands = ["rm "]
[ssh.always]
host = "127.0.0.1"
port = @PORT@
user = "@USER@"
key_secret = "box-key"
known_hosts = "@KNOWN_HOSTS@"
approve = "always"
[http.post]
base_url = "@API@"
methods = ["GET", "POST"]
approve_methods = ["POST"]
auth = "bearer"
token_secret = "api-token"
allow_private = true
[approval]
timeout = "2m"
remember = "10m"
`

// person answers the questions of an approval test's client: each answer
// it is given, in order, for the next question; a nil answer waits for
// the question to be withdrawn.
type person struct {
	mu      sync.Mutex
	asked   []*mcp.ElicitParams
	answers chan *mcp.ElicitResult
}

func newPerson() *person { return &person{answers: make(chan *mcp.ElicitResult, 16)} }

func (p *person) answer(ctx context.Context, q *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	p.mu.Lock()
	p.asked = append(p.asked, q)
	p.mu.Unlock()
	select {
	case a := <-p.answers:
		if a != nil {
			return a, nil
		}
		<-ctx.Done()
		return nil, ctx.Err()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// questions returns how many questions were asked so far, and the last.
func (p *person) questions() (int, *mcp.ElicitParams) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.asked) == 0 {
		return 0, nil
	}
	return len(p.asked), p.asked[len(p.asked)-1]
}

func decided(d string) *mcp.ElicitResult {
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": d}}
}

// approvalClient is one kind of MCP client of a serve process.
type approvalClient struct {
	name string
	// start connects a client answering with p (nil: a client that
	// declares no elicitation support) and returns its call function.
	start func(t *testing.T, s *served, cfgPath string, p *person) func(tool string, args map[string]any) *mcp.CallToolResult
}

// sdkClient is the go-sdk's client at protocol version (empty: its
// latest, which returns questions with results).
func sdkClient(version string) func(t *testing.T, s *served, cfgPath string, p *person) func(string, map[string]any) *mcp.CallToolResult {
	return func(t *testing.T, s *served, cfgPath string, p *person) func(string, map[string]any) *mcp.CallToolResult {
		stderr := &syncbuf.Buffer{}
		cmd := exec.Command(actiongwBinary(t), "serve", "-config", cfgPath)
		cmd.Env, cmd.Stderr = s.env, stderr
		opts := &mcp.ClientOptions{}
		if p != nil {
			opts.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return p.answer(ctx, req.Params)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "approval-test", Version: "1"}, opts).
			Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatalf("connect: %v\n%s", err, stderr)
		}
		t.Cleanup(func() { cs.Close() })
		return func(tool string, args map[string]any) *mcp.CallToolResult {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			if err != nil {
				t.Fatalf("%s: %v\nstderr:\n%s", tool, err, stderr)
			}
			return r
		}
	}
}

// hostClient is the project's own host client.
func hostClient(t *testing.T, s *served, cfgPath string, p *person) func(string, map[string]any) *mcp.CallToolResult {
	stderr := &syncbuf.Buffer{}
	cmd := exec.Command(actiongwBinary(t), "serve", "-config", cfgPath)
	cmd.Env, cmd.Stderr = s.env, stderr
	opts := mcphost.Options{}
	if p != nil {
		opts.OnElicit = p.answer
	}
	client, err := mcphost.Start(context.Background(), cmd, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.Initialize(ctx); err != nil {
		t.Fatalf("initialize: %v\n%s", err, stderr)
	}
	return func(tool string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		r, err := client.CallTool(ctx, tool, args, nil)
		if err != nil {
			t.Fatalf("%s: %v\nstderr:\n%s", tool, err, stderr)
		}
		return r
	}
}

var approvalClients = []approvalClient{
	{"sdk-2026-07-28", sdkClient("")},
	{"sdk-2025-11-25", sdkClient("2025-11-25")},
	{"mcphost", hostClient},
}

// startApprovals serves approvalTables, with extra TOML after them.
func startApprovals(t *testing.T, extra string) *served {
	s := startServedWith(t, servedOptions{tables: approvalTables + extra})
	// The API's URL is known only once it runs: write it in.
	b, err := os.ReadFile(s.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.cfgPath, []byte(strings.ReplaceAll(string(b), "@API@", s.api.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// withTimeout writes a copy of s's config whose [approval] timeout is d
// and returns its path.
func withTimeout(t *testing.T, s *served, d string) string {
	b, err := os.ReadFile(s.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), `timeout = "2m"`, fmt.Sprintf("timeout = %q", d), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// intentOf is the audit intent of the call whose command (or path) is
// what; it fails the test when there is none or more than one.
func intentOf(t *testing.T, state, what string) audit.Record {
	t.Helper()
	var found []audit.Record
	for _, r := range auditRecords(t, state) {
		if r.Kind == audit.KindIntent && (r.Command == what || r.Path == what) {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d intents of %q in the audit log; want 1", len(found), what)
	}
	return found[0]
}

// outcomeOfHandle is the outcome record with the intent's handle.
func outcomeOfHandle(t *testing.T, state string, intent audit.Record) audit.Record {
	t.Helper()
	return record(t, state, audit.KindOutcome, intent.Handle)
}

func TestServeApprovals(t *testing.T) {
	s := startApprovals(t, "")
	for _, kind := range approvalClients {
		t.Run(kind.name, func(t *testing.T) {
			p := newPerson()
			call := kind.start(t, s, s.cfgPath, p)
			uniq := func(what string) string { return fmt.Sprintf("echo %s-%s", kind.name, what) }

			// A listed command runs without a question.
			r := call("ssh_exec", map[string]any{"target": "ask", "command": "echo listed"})
			if r.IsError {
				t.Fatalf("listed command: %s", resultText(r))
			}
			if n, _ := p.questions(); n != 0 {
				t.Fatalf("a listed command asked %d questions", n)
			}

			// Approved once: it runs, and the intent says who let it.
			cmd := uniq("approved")
			p.answers <- decided("approve")
			r = call("ssh_exec", map[string]any{"target": "ask", "command": cmd})
			if r.IsError || !strings.Contains(resultText(r), kind.name+"-approved") {
				t.Fatalf("approved command: %s", resultText(r))
			}
			n, q := p.questions()
			if n != 1 || !strings.Contains(q.Message, cmd) || !strings.Contains(q.Message, `"ask"`) {
				t.Fatalf("after an approval: %d questions, the last %+v", n, q)
			}
			in := intentOf(t, s.state, cmd)
			if len(in.Approvals) != 1 || in.Approvals[0].Answer != "approve" || in.Approvals[0].Asked != "command" || in.Decision != "allow" {
				t.Errorf("intent of an approved command: %+v", in)
			}

			// Declined, dismissed: denied by the person, not by a rule,
			// and nothing ran.
			for _, c := range []struct {
				answer *mcp.ElicitResult
				word   string
				want   string
			}{
				{&mcp.ElicitResult{Action: "decline"}, "declined", "decline"},
				{decided("deny"), "denied", "decline"},
				{&mcp.ElicitResult{Action: "cancel"}, "dismissed", "cancel"},
			} {
				cmd := fmt.Sprintf("touch %s/%s-%s", s.state, kind.name, c.word)
				p.answers <- c.answer
				r := call("ssh_exec", map[string]any{"target": "always", "command": cmd})
				if !r.IsError || !strings.Contains(resultText(r), "person") {
					t.Errorf("%s: got %s; want a denial by the person", c.word, resultText(r))
				}
				if _, err := os.Stat(fmt.Sprintf("%s/%s-%s", s.state, kind.name, c.word)); err == nil {
					t.Errorf("%s: the command ran", c.word)
				}
				in := intentOf(t, s.state, cmd)
				out := outcomeOfHandle(t, s.state, in)
				if len(in.Approvals) != 1 || in.Approvals[0].Answer != c.want || in.Decision != "deny" || in.Rule != "approve" ||
					out.Status != "denied" || out.Rule != "approve" {
					t.Errorf("%s: intent %+v, outcome %+v; want the person's answer %q and a denial under rule approve", c.word, in, out, c.want)
				}
			}

			// A deny rule refuses without asking.
			before, _ := p.questions()
			r = call("ssh_exec", map[string]any{"target": "ask", "command": "rm -rf /nothing"})
			if !r.IsError || !strings.Contains(resultText(r), "deny_commands") {
				t.Errorf("denied command: %s", resultText(r))
			}
			if after, _ := p.questions(); after != before {
				t.Errorf("a command a deny rule refuses was asked about")
			}

			// Approved for a while: the same exact command runs again
			// without asking; another command asks.
			cmd = uniq("for-a-while")
			p.answers <- decided("approve_for")
			if r := call("ssh_exec", map[string]any{"target": "ask", "command": cmd}); r.IsError {
				t.Fatalf("approve_for: %s", resultText(r))
			}
			before, _ = p.questions()
			if r := call("ssh_exec", map[string]any{"target": "ask", "command": cmd}); r.IsError {
				t.Fatalf("remembered: %s", resultText(r))
			}
			if after, _ := p.questions(); after != before {
				t.Errorf("an action approved for a while was asked about again")
			}
			var answers []string
			for _, r := range auditRecords(t, s.state) {
				if r.Kind == audit.KindIntent && r.Command == cmd {
					answers = append(answers, r.Approvals[0].Answer)
				}
			}
			if !slices.Equal(answers, []string{"approve_for", "remembered"}) {
				t.Errorf("answers recorded for the remembered command: %q", answers)
			}
			p.answers <- decided("deny")
			if r := call("ssh_exec", map[string]any{"target": "ask", "command": cmd + " --other"}); !r.IsError {
				t.Errorf("another command ran on the remembered approval: %s", resultText(r))
			}

			// A POST asks, with its method, path and body; a GET does not.
			body := `{"deploy":"` + kind.name + `"}`
			before, _ = p.questions()
			if r := call("http_request", map[string]any{"endpoint": "post", "method": "GET", "path": "/get-" + kind.name}); r.IsError {
				t.Fatalf("GET: %s", resultText(r))
			}
			if after, _ := p.questions(); after != before {
				t.Errorf("a GET was asked about")
			}
			p.answers <- decided("approve")
			if r := call("http_request", map[string]any{"endpoint": "post", "method": "POST", "path": "/post-" + kind.name, "body": body}); r.IsError {
				t.Fatalf("approved POST: %s", resultText(r))
			}
			_, q = p.questions()
			if !strings.Contains(q.Message, "POST /post-"+kind.name) || !strings.Contains(q.Message, kind.name) {
				t.Errorf("POST question: %q", q.Message)
			}
			if in := intentOf(t, s.state, "/post-"+kind.name); len(in.Approvals) != 1 || in.Approvals[0].Asked != "request" {
				t.Errorf("POST intent: %+v", in)
			}
			p.mu.Lock()
			for _, q := range p.asked {
				if strings.Contains(q.Message, s.token) {
					t.Errorf("a question shows the API token: %q", q.Message)
				}
			}
			p.mu.Unlock()
		})
	}
}
