package mcpserver

import (
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/gateway"
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
