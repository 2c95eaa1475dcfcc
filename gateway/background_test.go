package gateway

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

func TestBackgroundSlots(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	cfg := f.reparse(t, "")
	cfg.Server.StateDir, cfg.Server.MaxBackgroundActions = t.TempDir(), 1
	gw := New(ctx, Options{Config: cfg, Secrets: f.store})
	defer gw.Close()
	zero, short := 0.0, 0.2
	exec := func(command string, wait *float64) *ToolResult {
		return gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: command, WaitS: wait}, nil)
	}

	bg := exec("sleep 30", &zero)
	out, ok := bg.Structured.(*SSHExecOutput)
	if !ok || out.Status != StatusRunning || bg.IsError {
		t.Fatalf("wait_s 0: %s", bg.Text)
	}
	if r := exec("sleep 30", &zero); !r.IsError || !strings.Contains(r.Text, "max_background_actions") {
		t.Errorf("a second background action with the one slot taken: %s", r.Text)
	}
	// No slot: a call whose wait ends waits on for its action.
	r := exec("sleep 1; echo attended", &short)
	if fg, ok := r.Structured.(*SSHExecOutput); !ok || fg.Status != StatusExited || fg.Stdout.Head != "attended\n" {
		t.Errorf("past wait_s without a background slot: %s", r.Text)
	}

	r = gw.CancelAction(ctx, CancelActionInput{Handle: out.Handle})
	if c, ok := r.Structured.(*SSHExecOutput); !ok || c.Status != StatusCancelled || !strings.Contains(c.Reason, "cancel_action") {
		t.Errorf("cancel_action: %s", r.Text)
	}
	// The slot is free again.
	if r := exec("true", &zero); r.IsError {
		t.Errorf("after the cancel: %s", r.Text)
	}
}

func TestActionStatusAndList(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	zero := 0.0
	// It runs until it is cancelled: no wall time is assumed. The bytes
	// after the token let the stream decide it while the command runs:
	// bytes that begin a secret are held until 6 times its length follow.
	r := f.gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "echo " + apiToken + "; seq 100; exec sleep 60", WaitS: &zero}, nil)
	h := r.Structured.(*SSHExecOutput).Handle

	list := f.gw.ListActions(ctx, ListActionsInput{Status: "running"})
	lo := list.Structured.(*ListActionsOutput)
	if len(lo.Actions) != 1 || lo.Actions[0].Handle != h || lo.Actions[0].Tool != "ssh_exec" || !lo.Actions[0].Background {
		t.Errorf("list_actions running: %+v", lo)
	}
	if s := structured(t, list) + list.Text; strings.Contains(s, apiToken) || !strings.Contains(s, "[REDACTED:api-token]") {
		t.Errorf("list_actions shows the credential: %s", s)
	}

	// Cancelled once its line arrived.
	testenv.WaitFor(t, 30*time.Second, "the echoed line", func() bool {
		r := f.gw.ActionStatus(ctx, ActionStatusInput{Handle: h, WaitS: &zero}, nil)
		return r.Structured.(*SSHExecOutput).Stdout.Bytes > 0
	})
	final := f.gw.CancelAction(ctx, CancelActionInput{Handle: h})
	if out := final.Structured.(*SSHExecOutput); out.Status != StatusCancelled || !strings.HasPrefix(out.Stdout.Head, "[REDACTED:api-token]\n1\n2\n") {
		t.Errorf("cancel_action: %s", final.Text)
	}
	// Its slots were given back before the result was.
	if n := f.gw.ActiveActions(); n != 0 {
		t.Errorf("%d actions active right after cancel_action returned; want 0", n)
	}
	if again := f.gw.ActionStatus(ctx, ActionStatusInput{Handle: h, WaitS: &zero}, nil); again.Structured.(*SSHExecOutput).Stdout.SHA256 != final.Structured.(*SSHExecOutput).Stdout.SHA256 {
		t.Errorf("action_status of the finished action: %s", again.Text)
	}
	if lo := f.gw.ListActions(ctx, ListActionsInput{Status: "running"}).Structured.(*ListActionsOutput); len(lo.Actions) != 0 {
		t.Errorf("list_actions running after the end: %+v", lo)
	}
	if r := f.gw.CancelAction(ctx, CancelActionInput{Handle: h}); !strings.Contains(r.Text, "already ended") {
		t.Errorf("cancel_action of a finished action: %s", r.Text)
	}
	for _, r := range []*ToolResult{
		f.gw.ActionStatus(ctx, ActionStatusInput{Handle: "out_nope"}, nil),
		f.gw.CancelAction(ctx, CancelActionInput{Handle: strings.Repeat("h", 1<<16)}),
	} {
		if !r.IsError || !strings.Contains(r.Text, "list_actions") || len(r.Text) > 600 {
			t.Errorf("unknown handle: %s", r.Text)
		}
	}
}

// A cancelled action_status ends its wait, never the action.
func TestActionStatusCancelEndsOnlyTheWait(t *testing.T) {
	f := newFixture(t)
	zero := 0.0
	r := f.gw.SSHExec(context.Background(), SSHExecInput{Target: "box", Command: "sleep 1; echo kept", WaitS: &zero}, nil)
	h := r.Structured.(*SSHExecOutput).Handle
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	wait := 60.0
	if out := f.gw.ActionStatus(ctx, ActionStatusInput{Handle: h, WaitS: &wait}, nil).Structured.(*SSHExecOutput); out.Status != StatusRunning {
		t.Errorf("action_status with a cancelled call: %s; want running", out.Status)
	}
	final := f.gw.ActionStatus(context.Background(), ActionStatusInput{Handle: h, WaitS: &wait}, nil)
	if out := final.Structured.(*SSHExecOutput); out.Status != StatusExited || out.Stdout.Head != "kept\n" {
		t.Errorf("the action after a cancelled action_status: %s", final.Text)
	}
}

func TestWaitFor(t *testing.T) {
	big, neg := 1e12, -5.0
	tests := []struct {
		asked *float64
		want  time.Duration
	}{
		{nil, 50 * time.Second},
		{&big, maxWait},
		{&neg, 0},
	}
	for _, tt := range tests {
		if got := waitFor(tt.asked, 50*time.Second); got != tt.want {
			t.Errorf("waitFor(%v) = %v; want %v", tt.asked, got, tt.want)
		}
	}
}

// A hostile timeout_s or wait_s saturates instead of overflowing into a
// negative duration.
func TestSecondsSaturate(t *testing.T) {
	for _, s := range []float64{1e12, 1e300} {
		if got := seconds(s); got <= 0 || got < 1e6*time.Second {
			t.Errorf("seconds(%g) = %v; want a huge positive duration", s, got)
		}
	}
}

// A negative wait_s is no wait: the action goes to the background.
func TestNegativeWaitIsBackground(t *testing.T) {
	f := newFixture(t)
	neg := -5.0
	r := f.gw.SSHExec(context.Background(), SSHExecInput{Target: "box", Command: "exec sleep 60", WaitS: &neg}, nil)
	out, ok := r.Structured.(*SSHExecOutput)
	if !ok || out.Status != StatusRunning {
		t.Fatalf("wait_s -5: %s", r.Text)
	}
	f.gw.CancelAction(context.Background(), CancelActionInput{Handle: out.Handle})
}

// Snapshots taken while an action ends must not race with its last bytes:
// output whose end could begin a secret is held back by the redactor and
// released as the action finishes (run with -race).
func TestSnapshotWhileFinishing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	zero := 0.0
	for range 20 {
		r := f.gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "printf 'x\\n" + apiToken[:8] + "'", WaitS: &zero}, nil)
		h := r.Structured.(*SSHExecOutput).Handle
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for {
					r := f.gw.ActionStatus(ctx, ActionStatusInput{Handle: h, WaitS: &zero}, nil)
					if r.Structured.(*SSHExecOutput).Status != StatusRunning {
						return
					}
				}
			})
		}
		wg.Wait()
	}
}
