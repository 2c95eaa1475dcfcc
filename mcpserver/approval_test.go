package mcpserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

func TestAnswerOf(t *testing.T) {
	once := &gateway.Question{}
	forAWhile := &gateway.Question{Remember: time.Minute}
	accept := func(d any) *mcp.ElicitResult {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": d}}
	}
	tests := []struct {
		name string
		res  *mcp.ElicitResult
		q    *gateway.Question
		want gateway.Answer // "" wants a *CannotAskError
	}{
		{"approve", accept("approve"), once, gateway.AnswerApprove},
		{"deny", accept("deny"), once, gateway.AnswerDecline},
		{"decline", &mcp.ElicitResult{Action: "decline"}, once, gateway.AnswerDecline},
		{"cancel", &mcp.ElicitResult{Action: "cancel"}, once, gateway.AnswerCancel},
		{"approve for a while", accept("approve_for"), forAWhile, gateway.AnswerApproveFor},
		// Not offered, so not taken: a client that makes up choices gets
		// no more than the question gave.
		{"approve for a while not offered", accept("approve_for"), once, ""},
		{"no decision", &mcp.ElicitResult{Action: "accept"}, once, ""},
		{"a decision of another type", accept(true), once, ""},
		{"unknown action", &mcp.ElicitResult{Action: "approve"}, once, ""},
	}
	for _, tt := range tests {
		got, err := answerOf(tt.res, tt.q)
		var cannot *gateway.CannotAskError
		if got != tt.want || (tt.want == "") != errors.As(err, &cannot) {
			t.Errorf("%s: got %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}

func TestElicitParamsOffers(t *testing.T) {
	for _, tt := range []struct {
		q    *gateway.Question
		want int
	}{{&gateway.Question{Message: "m"}, 2}, {&gateway.Question{Message: "m", Remember: time.Minute}, 3}} {
		p := elicitParams(tt.q)
		props := p.RequestedSchema.(map[string]any)["properties"].(map[string]any)
		if got := len(props["decision"].(map[string]any)["enum"].([]any)); got != tt.want || p.Mode != "form" {
			t.Errorf("remember %v: %d choices, mode %q; want %d, form", tt.q.Remember, got, p.Mode, tt.want)
		}
	}
}

// askLaterCall is a call of tool x with arguments {"i":i} at a protocol
// version that returns questions with results.
func askLaterCall(i int) *mcp.CallToolRequest {
	return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "x", Arguments: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}}
}

// TestRoundExpires: questions sent back with results whose calls never
// come back are forgotten at their expiry, with no other call to prune
// them; after close none is kept and none is taken.
func TestRoundExpires(t *testing.T) {
	defer goleak.VerifyNone(t)
	defer func(g time.Duration) { roundGrace = g }(roundGrace)
	roundGrace = 0
	ap := newApprovals()
	q := &gateway.Question{Key: "k", Timeout: time.Millisecond}
	const calls = 30
	for i := range calls {
		a := &asker{ap: ap, req: askLaterCall(i)}
		if _, _, err := a.askLater(q); !errors.Is(err, gateway.ErrAskLater) {
			t.Fatalf("call %d: got %v; want ErrAskLater", i, err)
		}
	}
	testenv.WaitFor(t, 20*time.Second, "the rounds to expire", func() bool { return ap.stats().Rounds == 0 })

	roundGrace = time.Hour
	for i := range calls {
		if _, _, err := (&asker{ap: ap, req: askLaterCall(i)}).askLater(q); !errors.Is(err, gateway.ErrAskLater) {
			t.Fatalf("call %d: got %v; want ErrAskLater", i, err)
		}
	}
	ap.close()
	if got := ap.stats().Rounds; got != 0 {
		t.Errorf("after close: %d rounds kept; want none", got)
	}
	var cannot *gateway.CannotAskError
	if _, _, err := (&asker{ap: ap, req: askLaterCall(0)}).askLater(q); !errors.As(err, &cannot) {
		t.Errorf("after close: got %v; want a CannotAskError", err)
	}
}
