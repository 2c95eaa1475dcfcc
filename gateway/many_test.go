package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// TestSSHExecMany runs the fan-out against the demo's SSH server, where the
// race detector can watch it: a target without its secret fails alone,
// the others are grouped; a running fan-out answers action_status with
// what ended so far; a cancel reaches every target.
func TestSSHExecMany(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	r := f.gw.SSHExecMany(ctx, SSHExecManyInput{Targets: []string{"box", "single", "nokey"}, Command: "echo hi"}, nil)
	out, ok := r.Structured.(*SSHExecManyOutput)
	if !ok {
		t.Fatalf("SSHExecMany: %s", r.Text)
	}
	if out.Status != StatusDone || out.Summary.ExitedOK != 2 || out.Summary.Failed != 1 || len(out.Groups) != 2 ||
		strings.Join(out.Groups[0].Targets, ",") != "box,single" || out.Groups[1].Targets[0] != "nokey" || !r.IsError {
		t.Errorf("SSHExecMany: %+v\n%s", out, r.Text)
	}
	if !strings.Contains(out.Groups[1].Reason, "missing-key") {
		t.Errorf("the failed target's reason: %q; want the missing secret named", out.Groups[1].Reason)
	}

	zero := 0.0
	r = f.gw.SSHExecMany(ctx, SSHExecManyInput{Targets: []string{"box", "single"}, Command: "sleep 300", WaitS: &zero}, nil)
	running := r.Structured.(*SSHExecManyOutput)
	if running.Status != StatusRunning {
		t.Fatalf("wait_s 0: %s", r.Text)
	}
	testenv.WaitFor(t, 2*time.Minute, "both targets running", func() bool { return f.gw.ActiveActions() == 3 })
	r = f.gw.ActionStatus(ctx, ActionStatusInput{Handle: running.Handle, WaitS: &zero}, nil)
	if st := r.Structured.(*SSHExecManyOutput); st.Summary.Running != 2 || len(st.Handles) != 2 {
		t.Errorf("action_status of the running fan-out: %+v", st)
	}
	r = f.gw.CancelAction(ctx, CancelActionInput{Handle: running.Handle})
	if st := r.Structured.(*SSHExecManyOutput); st.Status != StatusCancelled || st.Summary.Cancelled != 2 {
		t.Errorf("cancel_action of the fan-out: %+v\n%s", st, r.Text)
	}
}

// TestReportProgressIncreases: each progress a call gets is higher than
// the last, as the MCP spec wants, however long the count stays the same
// (here a second of silence between two lines of output, four intervals).
func TestReportProgressIncreases(t *testing.T) {
	f := newFixture(t)
	var reports []int64
	r := f.gw.SSHExec(context.Background(), SSHExecInput{Target: "box", Command: "echo a; sleep 1; echo b; sleep 1"},
		func(p ProgressReport) { reports = append(reports, p.Done) })
	if r.IsError {
		t.Fatal(r.Text)
	}
	if len(reports) == 0 {
		t.Fatalf("no progress during a command of two seconds")
	}
	for i := 1; i < len(reports); i++ {
		if reports[i] <= reports[i-1] {
			t.Errorf("progress %v: %d after %d", reports, reports[i], reports[i-1])
		}
	}
}

// TestBackgroundTurnWhenThere: a fan-out headed to the background lets a
// second target start as soon as it is there, on a free slot, while the
// first target holds the fan-out's own slot. (The turn used to wait for
// the own slot alone, that is for the first target's whole run: under
// load, when the targets asked before the fan-out got there.)
func TestBackgroundTurnWhenThere(t *testing.T) {
	g := &Gateway{}
	c := &core{background: make(slots, 2)}
	act := g.actions.begin("fan", &audit.Record{}, &action{}, c, func(error) {}, nil)
	own := make(chan struct{}, 1) // empty: the first target holds it
	got := make(chan error, 1)
	go func() {
		release, err := g.backgroundTurn(context.Background(), c, "fan", own, true)
		got <- err
		release()
	}()
	if !c.background.take() || !act.leave() { // the fan-out's own slot, as await takes it
		t.Fatal("the fan-out could not go to the background")
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // a hang only: the turn is taken at once
		t.Fatal("the second target got no turn once the fan-out was in the background")
	}
}

// TestBackgroundTurnWhenItStays: a fan-out headed to the background whose
// call waits for its end after all (no background slot was free) runs in
// the foreground: its targets take no background slot, and do not queue
// behind the one that holds its own.
func TestBackgroundTurnWhenItStays(t *testing.T) {
	g := &Gateway{}
	c := &core{background: make(slots, 1)}
	act := g.actions.begin("fan", &audit.Record{}, &action{}, c, func(error) {}, nil)
	own := make(chan struct{}, 1) // empty: the first target holds it
	got := make(chan error, 1)
	go func() {
		_, err := g.backgroundTurn(context.Background(), c, "fan", own, true)
		got <- err
	}()
	close(act.stays) // as await does when it waits for the end
	select {
	case err := <-got:
		if err != nil || len(c.background) != 0 {
			t.Fatalf("turn: %v, %d background slots taken; want a turn that takes none", err, len(c.background))
		}
	case <-time.After(time.Minute): // a hang only: the turn is taken at once
		t.Fatal("the second target got no turn while the fan-out's call waited for its end")
	}
}
