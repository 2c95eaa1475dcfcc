package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/gateway"
)

// Approvals reach the person through MCP elicitation, in one of two ways,
// by the protocol version of the session:
//
//   - Before 2026-07-28 the server sends elicitation/create while the call
//     waits, one question at a time per server, and the answer is the
//     client's response to that request.
//   - From 2026-07-28 a server may not send requests while it serves one
//     (multi round-trip requests, SEP-2322): the call returns the question
//     as an input request with a request state, and the client makes the
//     call again with the answer. The state names a round kept here, bound
//     to the call's tool and arguments and used once; an answer without a
//     round this server issued, or for other arguments, is not an answer.
//
// Either way the answer comes from the client's elicitation response, not
// from the tool's arguments, which are all the agent writes.

// multiRoundTrip is the first protocol version that returns questions
// with the result instead of sending them.
const multiRoundTrip = "2026-07-28"

// maxRounds bounds the questions waiting for a call to come again. Each
// is forgotten when its call comes back, or at its expiry (roundTTL).
const maxRounds = 64

// roundTTL is how long a question sent back with a result is kept for
// its call to come back: an answer later than q.Timeout is a timeout, and
// until twice that (and roundGrace for the call's way back) it is told so
// rather than asked again.
func roundTTL(q *gateway.Question) time.Duration { return 2*q.Timeout + roundGrace }

// roundGrace is a minute; tests shorten it.
var roundGrace = time.Minute

// decisions are the values of the one field of a question's form.
const (
	decisionApprove    = "approve"
	decisionApproveFor = "approve_for"
	decisionDeny       = "deny"
)

// approvals is what a server keeps for asking: the turn of the one
// question asked at a time, and the rounds of questions sent back.
type approvals struct {
	turn chan struct{} // holds a token while a question is out
	// asking, if set, reports the questions out at the client and those
	// withdrawn there (the connection's count).
	asking func() (open int, withdrawn int64)

	mu     sync.Mutex
	rounds map[string]*round // by request state
	closed bool
}

func newApprovals() *approvals {
	return &approvals{turn: make(chan struct{}, 1), rounds: map[string]*round{}}
}

// ApprovalStats is where a server's questions to the person stand, in
// the health tool's result.
type ApprovalStats struct {
	// Asking counts the questions sent as elicitation/create that the
	// client has neither answered nor had withdrawn: at most one.
	Asking int `json:"asking"`
	// Withdrawn counts the questions withdrawn at the client
	// (notifications/cancelled) because they timed out or their call
	// ended.
	Withdrawn int64 `json:"withdrawn"`
	// Rounds counts the questions sent back with a call's result (MCP
	// 2026-07-28) kept for the call to come back with the answer.
	Rounds int `json:"rounds"`
}

func (ap *approvals) stats() ApprovalStats {
	var st ApprovalStats
	if ap.asking != nil {
		st.Asking, st.Withdrawn = ap.asking()
	}
	ap.mu.Lock()
	st.Rounds = len(ap.rounds)
	ap.mu.Unlock()
	return st
}

// close forgets every round and stops their timers.
func (ap *approvals) close() {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	for state, r := range ap.rounds {
		ap.forget(state, r)
	}
	ap.closed = true
}

// forget drops the round kept under state; ap.mu is held.
func (ap *approvals) forget(state string, r *round) {
	if ap.rounds[state] != r {
		return
	}
	delete(ap.rounds, state)
	r.expiry.Stop()
}

// round is the questions of one call answered so far, and the one it
// was last sent back with.
type round struct {
	call     string            // digest of the tool's name and arguments
	answered map[string]answer // by gateway.Question.Key
	asked    *gateway.Question // nil once answered
	id       string            // the input request's id
	sent     time.Time         // when asked went out
	expiry   *time.Timer       // forgets the round, unless its call came back first
	params   *mcp.ElicitParams // what asked was sent as
}

type answer struct {
	a    gateway.Answer
	took time.Duration
}

// asker is the gateway.Approver of one call.
type asker struct {
	ap  *approvals
	log *slog.Logger
	req *mcp.CallToolRequest
	// out is set when the call is to return a question instead of a
	// result: the round, under its new state.
	out      *round
	outState string
}

func (env *toolEnv) askerFor(req *mcp.CallToolRequest) *asker {
	return &asker{ap: env.approvals, log: env.log, req: req}
}

// callDigest names a call by its tool and its arguments as they came,
// with the value the transport lifted out of them (lift.go) after them:
// arguments are one JSON object, so nothing of theirs reads as the ';'
// that follows.
func callDigest(req *mcp.CallToolRequest) string {
	p := req.Params
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s;", len(p.Name), p.Name)
	h.Write(p.Arguments)
	if v, ok := liftedValue(req); ok {
		fmt.Fprintf(h, ";lifted %d:", len(v))
		io.WriteString(h, v)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Ask implements gateway.Approver.
func (a *asker) Ask(ctx context.Context, q *gateway.Question) (gateway.Answer, time.Duration, error) {
	caps := a.req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil {
		return "", 0, &gateway.CannotAskError{Reason: "this MCP client cannot ask a person: it declared no elicitation support"}
	}
	if caps.Elicitation.Form == nil && caps.Elicitation.URL != nil {
		return "", 0, &gateway.CannotAskError{Reason: "this MCP client cannot ask a person: it declared elicitation by URL only, and a question is a form"}
	}
	if p := a.req.Session.InitializeParams(); p != nil && p.ProtocolVersion >= multiRoundTrip {
		if q.NowOnly {
			return "", 0, &gateway.CannotAskError{Reason: fmt.Sprintf("with MCP %s this question would go back with the call's result and the call would run again; "+
				"ask it with a call of its own first (for a host key: ssh_exec on %s)", p.ProtocolVersion, q.Target)}
		}
		return a.askLater(q)
	}
	return a.askNow(ctx, q)
}

// askNow sends q as elicitation/create and waits for the answer. Waiting
// for the question's turn counts against q.Timeout too, so that calls
// queued behind a question nobody answers end. A question not answered
// is withdrawn at the client before askNow returns, so before the call's
// result and the next question: the SDK sends its own cancellation from
// a goroutine that may lose that race, and gives it up after 5 s of a
// host that does not read, leaving the client a question nobody waits
// for.
func (a *asker) askNow(ctx context.Context, q *gateway.Question) (gateway.Answer, time.Duration, error) {
	start := time.Now()
	tctx, cancel := context.WithTimeout(ctx, q.Timeout)
	defer cancel()
	select {
	case a.ap.turn <- struct{}{}:
	case <-tctx.Done():
		if ctx.Err() != nil {
			return "", time.Since(start), ctx.Err()
		}
		return gateway.AnswerTimeout, time.Since(start), nil
	}
	defer func() { <-a.ap.turn }()
	wctx, w := withWithdrawal(tctx)
	res, err := a.req.Session.Elicit(wctx, elicitParams(q))
	took := time.Since(start)
	reason := "the question failed"
	switch {
	case ctx.Err() != nil:
		reason = fmt.Sprintf("the call ended: %v", context.Cause(ctx))
	case tctx.Err() != nil:
		reason = fmt.Sprintf("no answer within %v", q.Timeout)
	}
	if w.withdraw(reason) > 0 {
		a.log.Info("approval question withdrawn", "target", q.Target, "asked", q.Asked, "reason", reason)
	}
	switch {
	case ctx.Err() != nil:
		return "", took, ctx.Err()
	case tctx.Err() != nil:
		return gateway.AnswerTimeout, took, nil
	case err != nil:
		return "", took, &gateway.CannotAskError{Reason: fmt.Sprintf("the client failed to ask the person: %v", err)}
	}
	ans, err := answerOf(res, q)
	return ans, took, err
}

// completeWait bounds telling the client a question it was pointed to
// is over.
const completeWait = 5 * time.Second

// Point implements gateway.Pointer: it sends the client page, the place
// of q on the console's page, as a URL-mode elicitation, when the client
// declared it can open addresses and may be sent requests during a call
// (before MCP 2026-07-28). Whatever the client answers, only the console
// answers q: the client's accept says only that the person opened the
// page. When ctx ends, a pointer still open at the client is withdrawn,
// and one the client accepted is completed
// (notifications/elicitation/complete).
func (a *asker) Point(ctx context.Context, q *gateway.Question, page string) {
	caps := a.req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil || caps.Elicitation.URL == nil {
		return
	}
	if p := a.req.Session.InitializeParams(); p != nil && p.ProtocolVersion >= multiRoundTrip {
		return
	}
	id := rand.Text()
	wctx, w := withWithdrawal(ctx)
	res, err := a.req.Session.Elicit(wctx, &mcp.ElicitParams{
		Mode: "url",
		Message: "actiongw: this question waits for you in the actiongw console, and is answered only there: " +
			q.Message,
		URL:           page,
		ElicitationID: id,
	})
	if w.withdraw("the question was answered, timed out or its call ended") > 0 {
		return
	}
	if err != nil {
		a.log.Info("the client could not be pointed to the console", "target", q.Target, "error", err)
		return
	}
	a.log.Info("the client was pointed to the console", "target", q.Target, "action", res.Action)
	if res.Action != "accept" {
		return
	}
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), completeWait)
	defer cancel()
	if err := a.req.Session.NotifyElicitationComplete(cctx, &mcp.ElicitationCompleteParams{ElicitationID: id}); err != nil {
		a.log.Info("the client was not told the question is over", "error", err)
	}
}

// askLater answers q from the round the call came back with, or sends q
// back with the call's result (gateway.ErrAskLater).
func (a *asker) askLater(q *gateway.Question) (gateway.Answer, time.Duration, error) {
	p := a.req.Params
	call := callDigest(a.req)
	now := time.Now()
	ap := a.ap
	ap.mu.Lock()
	defer ap.mu.Unlock()
	if ap.closed {
		return "", 0, &gateway.CannotAskError{Reason: "the server is shutting down"}
	}
	r := a.out
	if r == nil {
		// The round the call came back with, used once: its state is
		// gone whatever the answer, and a round for other arguments is
		// no round of this call.
		if got, ok := ap.rounds[p.RequestState]; ok && p.RequestState != "" {
			ap.forget(p.RequestState, got)
			if got.call == call {
				r = got
			}
		}
	}
	if r != nil && r.asked != nil && r.asked.Key == q.Key {
		if res, ok := p.InputResponses[r.id].(*mcp.ElicitResult); ok {
			took := now.Sub(r.sent)
			ans, err := answerOf(res, q)
			if err != nil {
				return "", took, err
			}
			if took > q.Timeout {
				ans = gateway.AnswerTimeout
			}
			r.answered[q.Key] = answer{ans, took}
			r.asked = nil
		}
	}
	if r != nil {
		if got, ok := r.answered[q.Key]; ok {
			a.out = r // later questions of this call join the round
			return got.a, got.took, nil
		}
	}
	if r == nil {
		r = &round{call: call, answered: map[string]answer{}}
	}
	if len(ap.rounds) >= maxRounds {
		return "", 0, &gateway.CannotAskError{Reason: fmt.Sprintf("%d questions already wait for their calls to come back", maxRounds)}
	}
	if a.outState != "" {
		ap.forget(a.outState, r) // a later question of this call goes under a new state
	}
	state := rand.Text()
	r.asked, r.id, r.sent, r.params = q, rand.Text(), now, elicitParams(q)
	r.expiry = time.AfterFunc(roundTTL(q), func() {
		ap.mu.Lock()
		ap.forget(state, r)
		ap.mu.Unlock()
	})
	a.out, a.outState = r, state
	ap.rounds[state] = r
	return "", 0, gateway.ErrAskLater
}

// inputRequired is the result that sends the call's question back, or nil
// when the call asked none (or has its answers).
func (a *asker) inputRequired() *mcp.CallToolResult {
	a.ap.mu.Lock()
	defer a.ap.mu.Unlock()
	if a.out == nil || a.out.asked == nil {
		return nil
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{a.out.id: a.out.params},
		RequestState:  a.outState,
	}
}

// elicitParams is the form that asks q: its message and one decision.
func elicitParams(q *gateway.Question) *mcp.ElicitParams {
	choices := []any{decisionApprove, decisionDeny}
	help := "approve: run it once; deny: refuse it."
	if q.Remember > 0 {
		choices = []any{decisionApprove, decisionApproveFor, decisionDeny}
		help = fmt.Sprintf("approve: run it once; approve_for: run this exact action without asking for %v; deny: refuse it.", q.Remember)
	}
	return &mcp.ElicitParams{
		Mode:    "form",
		Message: "actiongw: " + q.Message,
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"decision": map[string]any{"type": "string", "title": "Decision", "description": help, "enum": choices},
			},
			"required": []any{"decision"},
		},
	}
}

// answerOf reads the person's answer from an elicitation result.
func answerOf(res *mcp.ElicitResult, q *gateway.Question) (gateway.Answer, error) {
	switch res.Action {
	case "decline":
		return gateway.AnswerDecline, nil
	case "cancel":
		return gateway.AnswerCancel, nil
	case "accept":
	default:
		return "", &gateway.CannotAskError{Reason: fmt.Sprintf("the client answered with the unknown action %.32q", res.Action)}
	}
	switch d, _ := res.Content["decision"].(string); {
	case d == decisionApprove:
		return gateway.AnswerApprove, nil
	case d == decisionApproveFor && q.Remember > 0:
		return gateway.AnswerApproveFor, nil
	case d == decisionDeny:
		return gateway.AnswerDecline, nil
	}
	return "", &gateway.CannotAskError{Reason: "the client's answer holds no decision the question offered"}
}
