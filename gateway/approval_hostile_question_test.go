package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/config"
)

// TestHostileQuestionHidesNothing: an agent shapes a command, an
// environment value or a header so that the question a person reads
// looks like a harmless action while another runs: characters that draw
// nothing (a Hangul filler, a variation selector, the combining grapheme
// joiner, a blank Braille pattern) make two different actions read the
// same, and a long run of spaces pushes the rest of an action past the
// edge of the person's view. Whatever the agent sends, the question holds
// no character that draws nothing and no long blank run, and it still
// names the end of the action.
func TestHostileQuestionHidesNothing(t *testing.T) {
	f := newFixture(t)
	cfg := f.reparse(t, "")
	cfg.SSH["box"].Approve = config.ApproveAlways
	cfg.SSH["box"].AllowEnv = []string{"NOTE"}
	cfg.HTTP["api"].ApproveMethods = []string{"POST"}
	if err := f.gw.Reload(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat(" ", 4000)
	tests := []struct {
		name   string
		call   func(ctx context.Context) *ToolResult
		hidden string // characters that must not reach the question as they are
		end    string // the part of the action that must be shown
	}{
		{"hangul filler", func(ctx context.Context) *ToolResult {
			return f.gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "chmod -R 777 ./public\u3164 # end-a"}, nil)
		}, "\u3164", "end-a"},
		{"variation selector", func(ctx context.Context) *ToolResult {
			return f.gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "cat ./notes\ufe0f.txt # end-b"}, nil)
		}, "\ufe0f", "end-b"},
		{"grapheme joiner and halfwidth filler", func(ctx context.Context) *ToolResult {
			return f.gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "ls\u034f \uffa0 # end-c"}, nil)
		}, "\u034f\uffa0", "end-c"},
		{"blank braille", func(ctx context.Context) *ToolResult {
			return f.gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "ls \u2800/tmp # end-d"}, nil)
		}, "\u2800", "end-d"},
		{"padded command", func(ctx context.Context) *ToolResult {
			return f.gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "uptime" + pad + "; echo end-e"}, nil)
		}, "", "end-e"},
		{"padded environment", func(ctx context.Context) *ToolResult {
			return f.gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "uptime", Env: map[string]string{"NOTE": "x" + pad + "end-f"}}, nil)
		}, "", "end-f"},
		{"padded header", func(ctx context.Context) *ToolResult {
			return f.gw.HTTPRequest(ctx, HTTPRequestInput{Endpoint: "api", Method: "POST", Path: "/deploy",
				Headers: map[string]string{"X-Note": "ok" + pad + "end-g"}}, nil)
		}, "", "end-g"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var shownText string
			decline := approverFunc(func(_ context.Context, q *Question) (Answer, time.Duration, error) {
				shownText = q.Message
				return AnswerDecline, 0, nil
			})
			if r := tt.call(WithApprover(context.Background(), decline)); r.status != StatusDenied {
				t.Fatalf("declined call: %s (status %q); want denied", r.Text, r.status)
			}
			for _, r := range tt.hidden {
				if strings.ContainsRune(shownText, r) {
					t.Errorf("the question holds %U, which draws nothing:\n%s", r, shownText)
				}
			}
			if strings.Contains(shownText, strings.Repeat(" ", maxSpaceRun+1)) {
				t.Errorf("the question holds a run of more than %d spaces:\n%.300s...", maxSpaceRun, shownText)
			}
			if !strings.Contains(shownText, tt.end) {
				t.Errorf("the question does not show %q:\n%s", tt.end, shownText)
			}
		})
	}
}
