package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/mcpserver"
	"github.com/actiongw/actiongw/mcpserver/mcphost"
)

// askingConfig is the TOML of an endpoint that asks the person before a
// POST, with [approval] timeout. The question comes before any request,
// so nothing listens at the address.
func askingConfig(timeout string) string {
	return fmt.Sprintf("[http.api]\nbase_url = \"http://127.0.0.1:9/\"\nmethods = [\"POST\"]\napprove_methods = [\"POST\"]\nallow_private = true\n"+
		"[approval]\ntimeout = %q\n", timeout)
}

// person is a person at the client who never answers: each question
// waits until the server withdraws it (or the client closes).
type person struct {
	asked, withdrawn atomic.Int64
	questions        chan string // each question's message, as it comes
}

func newPerson() *person { return &person{questions: make(chan string, 64)} }

func (p *person) answer(ctx context.Context, q *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	p.asked.Add(1)
	p.questions <- q.Message
	<-ctx.Done()
	p.withdrawn.Add(1)
	return nil, ctx.Err()
}

// startAsking serves askingConfig(timeout) to the project's host, whose
// person never answers.
func startAsking(t *testing.T, ctx context.Context, timeout string) (*server, *person) {
	t.Helper()
	p := newPerson()
	stderr := &syncbuf.Buffer{}
	c, err := mcphost.Start(ctx, serverCmd(t, writeConfig(t, 0, askingConfig(timeout)), stderr), mcphost.Options{OnElicit: p.answer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("server exit: %v", err)
		}
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr.String())
		}
	})
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	return &server{c, stderr}, p
}

func approvalStats(t *testing.T, ctx context.Context, s *server) mcpserver.ApprovalStats {
	t.Helper()
	res, err := s.CallTool(ctx, "health", map[string]any{}, nil)
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	var h mcpserver.Health
	if err := json.Unmarshal(mustJSON(t, res.StructuredContent), &h); err != nil {
		t.Fatalf("decoding health: %v", err)
	}
	return h.Approvals
}

func post(i int) map[string]any {
	return map[string]any{"endpoint": "api", "method": "POST", "path": fmt.Sprintf("/deploy/%d", i)}
}

// TestApprovalTimeoutWithdrawn is what a prompt-injected agent does to
// pile questions up at the person: 30 calls whose questions time out.
// Each question is withdrawn at the client (notifications/cancelled)
// before its call's result arrives, so when the result is in, the client
// has no question open; at the end the client has received a withdrawal
// for every question, and the server keeps nothing of them.
func TestApprovalTimeoutWithdrawn(t *testing.T) {
	ctx := testContext(t)
	s, p := startAsking(t, ctx, "300ms")
	const calls = 30
	for i := range calls {
		r, err := s.CallTool(ctx, "http_request", post(i), nil)
		if err != nil {
			t.Fatal(err)
		}
		if text := r.Content[0].(*mcp.TextContent).Text; !r.IsError || !strings.Contains(text, "no answer within 300ms") {
			t.Fatalf("call %d: got %q; want a denial for want of an answer", i, text)
		}
		// The host counts requests and withdrawals as it reads them, so
		// this is what it had read when the result came.
		if open := s.Outstanding(); len(open) != 0 {
			t.Errorf("call %d: its result came while the client still had %q open; want the question withdrawn first", i, open)
		}
	}
	asked := p.asked.Load()
	if asked == 0 {
		t.Fatal("no question reached the client")
	}
	testenv.WaitFor(t, 20*time.Second, "every question's prompt to end at the client", func() bool { return p.withdrawn.Load() == p.asked.Load() })
	if got := s.Metrics().CancelsReceived; got != asked {
		t.Errorf("the client received %d withdrawals for %d questions; want one each", got, asked)
	}
	st := approvalStats(t, ctx, s)
	if st.Asking != 0 || st.Withdrawn != asked || st.Rounds != 0 {
		t.Errorf("server: got %+v; want asking 0, withdrawn %d (one per question the client got), rounds 0", st, asked)
	}
	t.Logf("%d of %d questions reached the client before they timed out; all withdrawn", asked, calls)
}

// TestApprovalCancelWithdrawn: a call the agent cancels while its
// question waits withdraws the question at the client; the session
// answers the next call.
func TestApprovalCancelWithdrawn(t *testing.T) {
	ctx := testContext(t)
	s, p := startAsking(t, ctx, "10m")
	const calls = 5
	for i := range calls {
		pend, err := s.StartTool(ctx, "http_request", post(i), nil)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case q := <-p.questions:
			if !strings.Contains(q, fmt.Sprintf("/deploy/%d", i)) {
				t.Fatalf("call %d: asked %q", i, q)
			}
		case <-ctx.Done():
			t.Fatalf("call %d: no question", i)
		}
		if err := s.Cancel(pend.ID(), "the agent changed its mind"); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 20*time.Second, "the question to be withdrawn", func() bool { return len(s.Outstanding()) == 0 })
		testenv.WaitFor(t, 20*time.Second, "its prompt to end", func() bool { return p.withdrawn.Load() == int64(i+1) })
	}
	if got := s.Metrics().CancelsReceived; got != calls {
		t.Errorf("the client received %d withdrawals for %d questions; want one each", got, calls)
	}
	if st := approvalStats(t, ctx, s); st.Asking != 0 || st.Withdrawn != calls {
		t.Errorf("server: got %+v; want asking 0, withdrawn %d", st, calls)
	}
	if got := s.Metrics().ResponsesDropped; got != 0 {
		t.Errorf("the client received %d responses for no waiting call; want 0 (cancelled calls do not answer)", got)
	}
}

// TestRoundsBounded: from MCP 2026-07-28 a question goes back with
// the call's result and the server keeps it for the call to come back.
// An agent that never comes back cannot make the server keep more than
// maxRounds (64) of them: the calls past that are refused, and the
// rounds are forgotten at their expiry (TestRoundExpires).
func TestRoundsBounded(t *testing.T) {
	ctx := testContext(t)
	stderr := &syncbuf.Buffer{}
	client := mcp.NewClient(&mcp.Implementation{Name: "rounds", Version: "1"}, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, fmt.Errorf("not asked this way")
		},
	})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: serverCmd(t, writeConfig(t, 0, askingConfig("2m")), stderr)}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	defer cs.Close()
	const calls, kept = 70, 64
	refused := 0
	for i := range calls {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "http_request", Arguments: post(i)})
		if err != nil {
			t.Fatalf("call %d: %v\n%s", i, err, stderr)
		}
		switch {
		case r.NeedsInput() && i < kept:
		case !r.NeedsInput() && i >= kept && strings.Contains(r.Content[0].(*mcp.TextContent).Text, "already wait"):
			refused++
		default:
			t.Fatalf("call %d: got %+v", i, r)
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "health", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	var h mcpserver.Health
	if err := json.Unmarshal(mustJSON(t, res.StructuredContent), &h); err != nil {
		t.Fatal(err)
	}
	if h.Approvals.Rounds != kept || refused != calls-kept {
		t.Errorf("got %d rounds kept, %d calls refused; want %d and %d", h.Approvals.Rounds, refused, kept, calls-kept)
	}
}

// TestApprovalWithdrawnWhileHostBlocked: a host that stops reading while
// its person looks at the question (DESIGN names waiting for approval as
// a reason hosts stop) has the question withdrawn once it reads again,
// however long it stopped. The agent fills the server's stdout queue
// with results meanwhile, then cancels the call that asked: the
// withdrawal waits for room in the queue, with no deadline of its own
// (the SDK's cancellation gave up after 5 s and was lost).
func TestApprovalWithdrawnWhileHostBlocked(t *testing.T) {
	ctx := testContext(t)
	s, p := startAsking(t, ctx, "10m")
	needBacklog(t, s)
	asking, err := s.StartTool(ctx, "http_request", post(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.questions:
	case <-ctx.Done():
		t.Fatal("no question")
	}
	s.PauseReading()
	// One result stuck in the writer, 32 in the queue, the rest waiting
	// for room.
	const fill = 40
	var results []*mcphost.Pending
	for i := range fill {
		r, err := s.StartTool(ctx, "emit", map[string]any{"bytes": 1 << 20, "tag": fmt.Sprintf("fill-%d", i)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, r)
	}
	testenv.WaitFor(t, 30*time.Second, "the server's stdout queue to fill", func() bool {
		return strings.Count(s.stderr.String(), `"msg":"response queued"`) >= 33
	})
	if err := s.Cancel(asking.ID(), "the agent moves on"); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 20*time.Second, "the server to withdraw the question while stdout is blocked", func() bool {
		return s.logged("withdrawing a question")
	})
	if open := s.Outstanding(); len(open) != 1 {
		t.Fatalf("while blocked the client had %q open; want the one question", open)
	}
	s.ResumeReading()
	for _, r := range results {
		if _, err := r.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, 20*time.Second, "the withdrawal to reach the client", func() bool { return len(s.Outstanding()) == 0 })
	testenv.WaitFor(t, 20*time.Second, "its prompt to end", func() bool { return p.withdrawn.Load() == 1 })
	if st := approvalStats(t, ctx, s); st.Asking != 0 || st.Withdrawn != 1 {
		t.Errorf("server: got %+v; want asking 0, withdrawn 1", st)
	}
}
