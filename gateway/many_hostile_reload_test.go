package gateway

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// TestHostileFanoutAfterReload: a fan-out that runs its targets one after
// another keeps starting them long after it was called. A person who sees
// it and tightens the config (a rule that denies the command, a target
// removed) must stop what has not started yet: docs/configuration.md promises that
// calls starting after a reload use the new rules, and each target of a
// fan-out is an action of its own. The first target, already running,
// finishes under the rules it started with.
func TestHostileFanoutAfterReload(t *testing.T) {
	for _, tc := range []struct {
		name    string
		asks    bool                 // single asks before the command runs, and the person approves
		tighten func(*config.Config) // the reload's change
		want    string               // in the second target's reason
	}{
		{"rule", false, func(cfg *config.Config) {
			cfg.SSH["single"].DenyCommands = append(cfg.SSH["single"].DenyCommands, "^touch ")
		}, "denied"},
		{"removed", false, func(cfg *config.Config) { delete(cfg.SSH, "single") }, "removed"},
		// The fan-out asked no one: the new rule's question was never put.
		{"asks", false, func(cfg *config.Config) { cfg.SSH["single"].Approve = config.ApproveAlways }, "ask a person"},
		// The person approved the command on single at its host; the
		// reload moved single elsewhere (here another name of the same
		// server), where no one approved it.
		{"moved", true, func(cfg *config.Config) {
			cfg.SSH["single"].Approve = config.ApproveAlways
			cfg.SSH["single"].Host = "localhost"
		}, "changed the target"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			if tc.asks {
				cfg := f.reparse(t, "")
				cfg.SSH["single"].Approve = config.ApproveAlways
				if err := f.gw.Reload(ctx, cfg, nil); err != nil {
					t.Fatal(err)
				}
				ctx = WithApprover(ctx, approverFunc(func(context.Context, *Question) (Answer, time.Duration, error) {
					return AnswerApprove, 0, nil
				}))
			}
			dir := t.TempDir()
			// Each target leaves a mark when its command starts, then the
			// first waits for the test's go-ahead.
			command := "touch " + dir + "/ran.$$; while [ ! -e " + dir + "/go ]; do sleep 0.05; done"
			zero := 0.0
			r := f.gw.SSHExecMany(ctx, SSHExecManyInput{Targets: []string{"box", "single"}, Command: command, MaxParallel: 1, WaitS: &zero}, nil)
			fan, ok := r.Structured.(*SSHExecManyOutput)
			if !ok || fan.Status != StatusRunning {
				t.Fatalf("the fan-out did not start: %s", r.Text)
			}
			marks := func() int {
				m, _ := filepath.Glob(filepath.Join(dir, "ran.*"))
				return len(m)
			}
			testenv.WaitFor(t, 2*time.Minute, "the first target's command to start", func() bool { return marks() == 1 })

			cfg := f.reparse(t, "")
			tc.tighten(cfg)
			if err := f.gw.Reload(ctx, cfg, nil); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			wait := 120.0
			r = f.gw.ActionStatus(ctx, ActionStatusInput{Handle: fan.Handle, WaitS: &wait}, nil)
			out, ok := r.Structured.(*SSHExecManyOutput)
			if !ok || out.Status == StatusRunning {
				t.Fatalf("the fan-out did not end: %s", r.Text)
			}
			if got := marks(); got != 1 {
				t.Errorf("%d targets ran the command; want 1: the second started after a reload that refuses it", got)
			}
			if out.Summary.ExitedOK != 1 || out.Summary.Failed != 1 {
				t.Errorf("summary %+v; want box exited 0, single refused\n%s", out.Summary, r.Text)
			}
			for _, grp := range out.Groups {
				if grp.Targets[0] == "single" && !strings.Contains(grp.Reason, tc.want) {
					t.Errorf("single's reason %q lacks %q", grp.Reason, tc.want)
				}
			}
			audit := readAudit(t, f)
			if !strings.Contains(audit, `"target":"single"`) || !strings.Contains(audit, `"decision":"deny"`) {
				t.Errorf("the refusal of single is not in the audit log:\n%s", audit)
			}
		})
	}
}
