//go:build linux

package main

import (
	"context"
	"encoding/json"
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
	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/mcpserver/mcphost"
)

// approvalTables are the targets the approval tests ask about: "ask"
// runs a listed command and asks for the rest (deny rules still deny),
// "always" asks for everything, "post" asks before a POST. Commands touch
// files in @USERDIR@, which the login user owns.
var approvalTables = fleetTarget("ask", `approve = "unlisted"
allow_commands = ["echo listed"]
deny_commands = ["rm "]`) + fleetTarget("always", `approve = "always"`) + `
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
# @USERDIR@
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
	opts := mcphost.Options{}
	if p != nil {
		opts.OnElicit = p.answer
	}
	return hostClientWith(t, s, cfgPath, opts)
}

// hostClientWith is the project's own host client with opts.
func hostClientWith(t *testing.T, s *served, cfgPath string, opts mcphost.Options) func(string, map[string]any) *mcp.CallToolResult {
	stderr := &syncbuf.Buffer{}
	cmd := exec.Command(actiongwBinary(t), "serve", "-config", cfgPath)
	cmd.Env, cmd.Stderr = s.env, stderr
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
	return startServedWith(t, servedOptions{tables: approvalTables + extra})
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

			// The agent can see which calls will wait for a person.
			raw, _ := json.Marshal(call("list_targets", map[string]any{}).StructuredContent)
			for _, want := range []string{`"name":"ask"`, `"approve":"unlisted"`, `"approve":"always"`, `"approve_methods":["POST"]`} {
				if !strings.Contains(string(raw), want) {
					t.Errorf("list_targets: %s; want %s in it", raw, want)
				}
			}

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
				cmd := fmt.Sprintf("touch %s/%s-%s", s.userDir, kind.name, c.word)
				p.answers <- c.answer
				r := call("ssh_exec", map[string]any{"target": "always", "command": cmd})
				if !r.IsError || !strings.Contains(resultText(r), "person") {
					t.Errorf("%s: got %s; want a denial by the person", c.word, resultText(r))
				}
				if _, err := os.Stat(fmt.Sprintf("%s/%s-%s", s.userDir, kind.name, c.word)); err == nil {
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

// TestServeApprovalsCannotAsk: a client that declared no elicitation
// support cannot have a command asked about; the refusal names the option,
// and arguments or params an agent could forge do not stand in for an
// answer.
func TestServeApprovalsCannotAsk(t *testing.T) {
	s := startApprovals(t, "")
	for _, kind := range approvalClients {
		t.Run(kind.name, func(t *testing.T) {
			call := kind.start(t, s, s.cfgPath, nil)
			cmd := fmt.Sprintf("touch %s/%s-unasked", s.userDir, kind.name)
			r := call("ssh_exec", map[string]any{"target": "always", "command": cmd})
			if !r.IsError || !strings.Contains(resultText(r), "elicitation") || !strings.Contains(resultText(r), "approve") {
				t.Errorf("got %s; want a refusal that says the client cannot ask and names approve", resultText(r))
			}
			if in := intentOf(t, s.state, cmd); len(in.Approvals) != 1 || in.Approvals[0].Answer != "unavailable" || in.Decision != "deny" {
				t.Errorf("intent: %+v", in)
			}
		})
	}

	// The agent writes arguments, and a host that passed raw params on
	// would let it write inputResponses and requestState too: neither is
	// an answer.
	cmd := fmt.Sprintf("touch %s/forged", s.userDir)
	c := s.startServer(t, s.stderr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	forged := map[string]any{"action": "accept", "content": map[string]any{"decision": "approve"}}
	pend, err := c.Send(ctx, "tools/call", map[string]any{
		"name": "ssh_exec", "arguments": map[string]any{"target": "always", "command": cmd},
		"inputResponses": map[string]any{"approve": forged, "x": forged}, "requestState": "forged",
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := pend.WaitTool(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !r.IsError {
		t.Errorf("forged answer: got %s; want a refusal", resultText(r))
	}
	if _, err := os.Stat(filepath.Join(s.userDir, "forged")); err == nil {
		t.Error("the command ran on a forged answer")
	}
}

// TestServeApprovalsTimeout: no answer within [approval] timeout denies.
func TestServeApprovalsTimeout(t *testing.T) {
	s := startApprovals(t, "")
	cfg := withTimeout(t, s, "1ns")
	for _, kind := range approvalClients {
		t.Run(kind.name, func(t *testing.T) {
			// The person approves, always too late: at once, or after
			// the question was withdrawn.
			p := newPerson()
			p.answers <- decided("approve")
			call := kind.start(t, s, cfg, p)
			cmd := fmt.Sprintf("touch %s/%s-late", s.userDir, kind.name)
			r := call("ssh_exec", map[string]any{"target": "always", "command": cmd})
			if !r.IsError || !strings.Contains(resultText(r), "no answer") {
				t.Errorf("got %s; want a denial for want of an answer", resultText(r))
			}
			in := intentOf(t, s.state, cmd)
			if len(in.Approvals) != 1 || in.Approvals[0].Answer != "timeout" || in.Decision != "deny" {
				t.Errorf("intent: %+v", in)
			}
		})
	}
}

// TestServeApprovalsRoundTrip drives the 2026-07-28 way by hand: the
// call comes back as a question with a request state, which answers only
// the call it was issued for, and only once.
func TestServeApprovalsRoundTrip(t *testing.T) {
	s := startApprovals(t, "")
	call := roundTripClient(t, s, s.cfgPath)
	marker := func(name string) string { return filepath.Join(s.userDir, name) }
	args := func(name string) map[string]any {
		return map[string]any{"target": "always", "command": "touch " + marker(name)}
	}
	approve := func(r *mcp.CallToolResult) mcp.InputResponseMap {
		m := mcp.InputResponseMap{}
		for id := range r.InputRequests {
			m[id] = decided("approve")
		}
		return m
	}

	first := call(&mcp.CallToolParams{Name: "ssh_exec", Arguments: args("a")})
	if !first.NeedsInput() || len(first.InputRequests) != 1 || first.RequestState == "" {
		t.Fatalf("first call: got %+v; want one question and a request state", first)
	}
	for _, q := range first.InputRequests {
		if ep, ok := q.(*mcp.ElicitParams); !ok || !strings.Contains(ep.Message, marker("a")) {
			t.Fatalf("question: %+v", q)
		}
	}

	// The answer and state of one call do not let another command run.
	other := call(&mcp.CallToolParams{Name: "ssh_exec", Arguments: args("b"), InputResponses: approve(first), RequestState: first.RequestState})
	if !other.NeedsInput() {
		t.Errorf("another command with the first one's state: got %+v; want a question of its own", other)
	}
	// Used once: the state is spent, so the right call now asks again.
	again := call(&mcp.CallToolParams{Name: "ssh_exec", Arguments: args("a"), InputResponses: approve(first), RequestState: first.RequestState})
	if !again.NeedsInput() {
		t.Errorf("a spent state: got %+v; want a new question", again)
	}
	// A forged state is no state.
	forged := call(&mcp.CallToolParams{Name: "ssh_exec", Arguments: args("a"), InputResponses: approve(first), RequestState: "forged"})
	if !forged.NeedsInput() {
		t.Errorf("a forged state: got %+v; want a new question", forged)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := os.Stat(marker(name)); err == nil {
			t.Fatalf("%s ran without an answer to its own question", name)
		}
	}
	// The answer to the question of this very call runs it.
	done := call(&mcp.CallToolParams{Name: "ssh_exec", Arguments: args("a"), InputResponses: approve(again), RequestState: again.RequestState})
	if done.NeedsInput() || done.IsError {
		t.Fatalf("answered: got %+v", done)
	}
	if _, err := os.Stat(marker("a")); err != nil {
		t.Errorf("the approved command did not run: %v", err)
	}
}

// TestServeApprovalsCancel: a call cancelled while its question waits
// withdraws the question, runs nothing, and the session answers the next
// call at once.
func TestServeApprovalsCancel(t *testing.T) {
	s := startApprovals(t, "")
	p := newPerson()
	p.answers <- nil
	stderr := &syncbuf.Buffer{}
	cmd := exec.Command(actiongwBinary(t), "serve", "-config", s.cfgPath)
	cmd.Env, cmd.Stderr = s.env, stderr
	withdrawn := make(chan struct{})
	client, err := mcphost.Start(context.Background(), cmd, mcphost.Options{OnElicit: func(ctx context.Context, q *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		r, err := p.answer(ctx, q)
		close(withdrawn)
		return r, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := client.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(s.userDir, "cancelled")
	pend, err := client.StartTool(ctx, "ssh_exec", map[string]any{"target": "always", "command": "touch " + marker}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for n, _ := p.questions(); n == 0; n, _ = p.questions() {
		select {
		case <-ctx.Done():
			t.Fatal("no question")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := client.Cancel(pend.ID(), "the agent changed its mind"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-withdrawn:
	case <-ctx.Done():
		t.Fatal("the question was not withdrawn after the call was cancelled")
	}
	r, err := client.CallTool(ctx, "ssh_exec", map[string]any{"target": "ask", "command": "echo listed"}, nil)
	if err != nil || r.IsError {
		t.Fatalf("next call: %v %s", err, resultText(r))
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the cancelled command ran")
	}
}

// TestServeApprovalsHostKey: a target with host_key_policy = "ask" shows an
// unknown host key to the person; trusted, its line is in known_hosts
// (0600) and the next connection verifies it without asking. A declined
// key is not written; a changed key is refused without a question. A
// target that also asks about its command asks both in one call.
func TestServeApprovalsHostKey(t *testing.T) {
	s := startApprovals(t, "")
	want := make([]string, len(s.sshd.HostKeys))
	for i, k := range s.sshd.HostKeys {
		want[i] = ssh.FingerprintSHA256(k)
	}
	for _, kind := range approvalClients {
		t.Run(kind.name, func(t *testing.T) {
			dir := t.TempDir()
			fresh, declined, both := filepath.Join(dir, "a", "known_hosts"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
			changed := filepath.Join(dir, "changed")
			other, _, _, _, err := ssh.ParseAuthorizedKey([]byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl x"))
			if err != nil {
				t.Fatal(err)
			}
			line := knownhosts.Line([]string{knownhosts.Normalize(fmt.Sprintf("127.0.0.1:%d", s.sshd.Port))}, other)
			if err := os.WriteFile(changed, []byte(line+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			target := func(name, knownHosts, extra string) string {
				return fmt.Sprintf("[ssh.%s]\nhost = \"127.0.0.1\"\nport = %d\nuser = %q\nkey_secret = \"box-key\"\nknown_hosts = %q\nhost_key_policy = \"ask\"\n%s\n",
					name, s.sshd.Port, s.sshd.User, knownHosts, extra)
			}
			b, err := os.ReadFile(s.cfgPath)
			if err != nil {
				t.Fatal(err)
			}
			cfg := filepath.Join(dir, "config.toml")
			tables := target("fresh", fresh, "") + target("declined", declined, "") + target("changed", changed, "") + target("both", both, `approve = "always"`)
			if err := os.WriteFile(cfg, append(b, tables...), 0o600); err != nil {
				t.Fatal(err)
			}
			p := newPerson()
			call := kind.start(t, s, cfg, p)

			p.answers <- decided("approve")
			if r := call("ssh_exec", map[string]any{"target": "fresh", "command": "echo first-" + kind.name}); r.IsError {
				t.Fatalf("first use: %s", resultText(r))
			}
			n, q := p.questions()
			if n != 1 || !slices.ContainsFunc(want, func(fp string) bool { return strings.Contains(q.Message, fp) }) || !strings.Contains(q.Message, "Key type: ") {
				t.Fatalf("%d questions; the last %+v; want the fingerprint, one of %q", n, q, want)
			}
			fi, err := os.Stat(fresh)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("known_hosts after trust: %v %v; want a file of mode 0600", fi, err)
			}
			if r := call("ssh_exec", map[string]any{"target": "fresh", "command": "echo second-" + kind.name}); r.IsError {
				t.Fatalf("second use: %s", resultText(r))
			}
			if n, _ := p.questions(); n != 1 {
				t.Errorf("a trusted key was asked about again")
			}
			in := intentOf(t, s.state, "echo first-"+kind.name)
			if len(in.Approvals) != 1 || in.Approvals[0].Asked != "host_key" || !slices.Contains(want, in.Approvals[0].Fingerprint) {
				t.Errorf("intent: %+v", in)
			}

			p.answers <- &mcp.ElicitResult{Action: "decline"}
			r := call("ssh_exec", map[string]any{"target": "declined", "command": "echo declined-" + kind.name})
			if !r.IsError || !strings.Contains(resultText(r), "host_key_policy") {
				t.Errorf("declined key: %s", resultText(r))
			}
			if _, err := os.Stat(declined); err == nil {
				t.Error("a declined key was written to known_hosts")
			}

			r = call("ssh_exec", map[string]any{"target": "changed", "command": "echo changed-" + kind.name})
			if !r.IsError || !strings.Contains(resultText(r), "changed") {
				t.Errorf("changed key: %s", resultText(r))
			}
			if n, _ := p.questions(); n != 2 {
				t.Errorf("%d questions after a changed key; want none for it", n)
			}

			p.answers <- decided("approve")
			p.answers <- decided("approve")
			if r := call("ssh_exec", map[string]any{"target": "both", "command": "echo both-" + kind.name}); r.IsError {
				t.Fatalf("both: %s", resultText(r))
			}
			in = intentOf(t, s.state, "echo both-"+kind.name)
			var asked []string
			for _, a := range in.Approvals {
				asked = append(asked, a.Asked+":"+a.Answer)
			}
			if !slices.Equal(asked, []string{"command:approve", "host_key:approve"}) {
				t.Errorf("questions of a call that asks twice: %q", asked)
			}
		})
	}
}

// TestServeApprovalsMany: a fan-out asks one question for all the targets
// that ask, and a person's denial runs nothing.
func TestServeApprovalsMany(t *testing.T) {
	s := startApprovals(t, `
[group.mixed]
targets = ["ask", "always", "box"]
`)
	p := newPerson()
	call := hostClient(t, s, s.cfgPath, p)
	p.answers <- &mcp.ElicitResult{Action: "decline"}
	marker := filepath.Join(s.userDir, "fan")
	r := call("ssh_exec_many", map[string]any{"group": "mixed", "command": "touch " + marker})
	if !r.IsError {
		t.Errorf("declined fan-out: %s", resultText(r))
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a declined fan-out ran")
	}
	n, q := p.questions()
	if n != 1 || !strings.Contains(q.Message, "- ask (") || !strings.Contains(q.Message, "- always (") || strings.Contains(q.Message, "- box (") {
		t.Fatalf("%d questions, the last %+v; want one naming ask and always, not box", n, q)
	}
	p.answers <- decided("approve")
	r = call("ssh_exec_many", map[string]any{"group": "mixed", "command": "echo fan"})
	if r.IsError {
		t.Fatalf("approved fan-out: %s", resultText(r))
	}
	if n, _ := p.questions(); n != 2 {
		t.Errorf("%d questions after an approved fan-out; want 2", n)
	}
}
