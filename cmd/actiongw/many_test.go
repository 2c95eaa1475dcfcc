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
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// fleetTarget is an [ssh.NAME] table for the test sshd with extra lines.
func fleetTarget(name, extra string) string {
	return fmt.Sprintf("[ssh.%s]\nhost = \"127.0.0.1\"\nport = @PORT@\nuser = \"@USER@\"\nkey_secret = \"box-key\"\nknown_hosts = \"@KNOWN_HOSTS@\"\n%s\n", name, extra)
}

// startFleet serves 22 targets m01..m22 that are the same sshd under other
// names (so other pooled connections): m01-m05 set ROLE=canary. Also
// unreach (a closed port) and denier (which denies touch), and groups.
func startFleet(t *testing.T) *served {
	var b strings.Builder
	for i := 1; i <= 22; i++ {
		extra := ""
		if i <= 5 {
			extra = `env = { ROLE = "canary" }`
		}
		b.WriteString(fleetTarget(fmt.Sprintf("m%02d", i), extra))
	}
	b.WriteString(strings.Replace(fleetTarget("unreach", ""), "@PORT@", fmt.Sprint(testenv.FreePort(t)), 1))
	b.WriteString(fleetTarget("denier", `deny_commands = ["touch"]`))
	b.WriteString(fleetTarget("solo", "max_concurrent = 1"))
	b.WriteString(`
[group.fleet]
description = "every m"
targets = ["m*"]
[group.withbad]
targets = ["m0*", "unreach"]
[group.withdeny]
targets = ["m01", "m02", "denier"]
`)
	return startServedWith(t, servedOptions{tables: b.String(), server: "max_concurrent_actions = 32\nmax_parallel = 8"})
}

func (s *served) many(t *testing.T, args map[string]any) (*mcp.CallToolResult, gateway.SSHExecManyOutput) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := s.client.CallTool(ctx, "ssh_exec_many", args, nil)
	if err != nil {
		t.Fatalf("ssh_exec_many: %v\nstderr:\n%s", err, s.stderr)
	}
	b, _ := json.Marshal(r)
	s.seen.Write(b)
	return r, decode[gateway.SSHExecManyOutput](t, r)
}

func TestServeExecMany(t *testing.T) {
	s := startFleet(t)

	t.Run("list_targets", func(t *testing.T) {
		r := s.call(t, "list_targets", map[string]any{})
		text := fmt.Sprint(r.StructuredContent)
		if !strings.Contains(resultText(r), "3 groups") || !strings.Contains(text, "withdeny") || !strings.Contains(text, "m22") {
			t.Errorf("list_targets: %s\n%s", resultText(r), text)
		}
	})

	t.Run("identical outputs grouped", func(t *testing.T) {
		r, out := s.many(t, map[string]any{"group": "fleet", "command": "echo ${ROLE:-web}"})
		if r.IsError || out.Status != "done" || out.Summary.Targets != 22 || out.Summary.ExitedOK != 22 || len(out.Groups) != 2 || len(out.Handles) != 22 {
			t.Fatalf("fleet: %+v\n%s", out, resultText(r))
		}
		web, canary := out.Groups[0], out.Groups[1]
		if len(web.Targets) != 17 || web.Stdout.Head != "web\n" || len(canary.Targets) != 5 || canary.Stdout.Head != "canary\n" || canary.Targets[0] != "m01" {
			t.Errorf("groups: %+v", out.Groups)
		}
		if text := resultText(r); !strings.Contains(text, "group 1 of 2: 17 targets") || !strings.Contains(text, "group 2 of 2: 5 targets (m01, m02, m03, m04, m05)") {
			t.Errorf("text: %s", text)
		}
		// Each target's action is its own, with its parent on record.
		h := out.Handles["m07"]
		r = s.call(t, "action_status", map[string]any{"handle": h})
		if st := decode[gateway.SSHExecOutput](t, r); st.Stdout.Head != "web\n" || st.Target != "m07" {
			t.Errorf("action_status of m07: %s", resultText(r))
		}
		if rec := record(t, s.state, audit.KindIntent, h); rec.Parent != out.Handle || rec.Tool != "ssh_exec" {
			t.Errorf("m07's intent: %+v; want parent %s", rec, out.Handle)
		}
		if rec := record(t, s.state, audit.KindOutcome, out.Handle); rec.Tool != "ssh_exec_many" || rec.Status != "done" || rec.Target != "group:fleet" {
			t.Errorf("the fan-out's own outcome: %+v", rec)
		}
	})

	t.Run("one unreachable", func(t *testing.T) {
		r, out := s.many(t, map[string]any{"group": "withbad", "command": "true", "max_parallel": 3})
		if !r.IsError || out.Summary.Targets != 10 || out.Summary.ExitedOK != 9 || out.Summary.Failed != 1 || len(out.Groups) != 2 {
			t.Fatalf("withbad: %+v\n%s", out.Summary, resultText(r))
		}
		if bad := out.Groups[1]; bad.Targets[0] != "unreach" || bad.Status != "failed" || !bad.DidNotStart || bad.Reason == "" {
			t.Errorf("the unreachable target's group: %+v", bad)
		}
	})

	t.Run("one denies: nothing runs", func(t *testing.T) {
		marker := filepath.Join(os.TempDir(), "actiongw-many-"+randomHex(t, 6))
		r, _ := s.many(t, map[string]any{"group": "withdeny", "command": "touch " + marker})
		if text := resultText(r); !r.IsError || !strings.Contains(text, "nothing ran") || !strings.Contains(text, "denier") || strings.Contains(text, "m01:") {
			t.Errorf("withdeny: %s", text)
		}
		if _, err := os.Stat(marker); err == nil {
			os.Remove(marker)
			t.Errorf("a target ran the command that another target denies")
		}
	})

	t.Run("one target with one slot", func(t *testing.T) {
		// The fan-out takes no slot of its targets: it would leave none.
		r, out := s.many(t, map[string]any{"targets": []string{"solo"}, "command": "echo " + s.token})
		if r.IsError || out.Summary.ExitedOK != 1 || !strings.Contains(out.Command, "[REDACTED:api-token]") {
			t.Errorf("solo: %+v\n%s", out, resultText(r))
		}
	})

	t.Run("cancel while targets wait their turn", func(t *testing.T) {
		const command = "sleep 119.3"
		p, err := s.client.StartTool(context.Background(), "ssh_exec_many", map[string]any{"targets": []string{"m1*"}, "command": command, "max_parallel": 2}, nil)
		if err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, time.Minute, "2 commands running on the host", func() bool {
			out, _ := exec.Command("pgrep", "-c", "-u", s.sshd.User, "-f", "^"+command+"$").Output()
			return strings.TrimSpace(string(out)) == "2"
		})
		before := len(auditRecords(t, s.state))
		if err := s.client.Cancel(p.ID(), "test"); err != nil {
			t.Fatal(err)
		}
		// Every one of the 10 targets has its intent and its outcome, with
		// the fan-out as parent; the 8 that waited did not start.
		testenv.WaitFor(t, time.Minute, "10 outcomes", func() bool {
			n := 0
			for _, rec := range auditRecords(t, s.state)[before:] {
				if rec.Kind == audit.KindOutcome && rec.Parent != "" {
					n++
				}
			}
			return n == 10
		})
		notStarted := 0
		for _, rec := range auditRecords(t, s.state)[before:] {
			if rec.Kind == audit.KindOutcome && rec.Parent != "" {
				if rec.Status != "cancelled" {
					t.Errorf("%s: %s; want cancelled", rec.Target, rec.Status)
				}
				if strings.Contains(rec.Reason, "did not start") {
					notStarted++
				}
			}
		}
		if notStarted != 8 {
			t.Errorf("%d targets recorded as not started; want 8", notStarted)
		}
		s.promptly(t)
	})

	t.Run("bad calls", func(t *testing.T) {
		for _, tt := range []struct {
			args map[string]any
			want string
		}{
			{map[string]any{"command": "true"}, "either targets"},
			{map[string]any{"command": "true", "group": "fleet", "targets": []string{"m01"}}, "either targets"},
			{map[string]any{"command": "true", "group": "nope"}, `unknown group "nope"`},
			{map[string]any{"command": "true", "targets": []string{"m01", "x*"}}, `"x*" names no SSH target`},
			{map[string]any{"command": "true", "targets": []string{strings.Repeat("*", 300)}}, "at most 256 bytes"},
			{map[string]any{"command": "true", "targets": slices.Repeat([]string{"m*"}, 300)}, "at most 256 names"},
		} {
			r := s.call(t, "ssh_exec_many", tt.args)
			if text := resultText(r); !r.IsError || !strings.Contains(text, tt.want) {
				t.Errorf("%v: %s; want %q", tt.args, text, tt.want)
			}
		}
	})

	t.Run("in the background", func(t *testing.T) {
		_, out := s.many(t, map[string]any{"targets": []string{"m1*"}, "command": "sleep 1; echo late", "wait_s": 0})
		if out.Status != "running" || out.Summary.Targets != 10 {
			t.Fatalf("wait_s 0: %+v", out)
		}
		r := s.call(t, "action_status", map[string]any{"handle": out.Handle, "wait_s": 60})
		if done := decode[gateway.SSHExecManyOutput](t, r); done.Status != "done" || done.Summary.ExitedOK != 10 || len(done.Groups) != 1 {
			t.Errorf("action_status of the fan-out: %s", resultText(r))
		}
	})

	t.Run("cancel", func(t *testing.T) {
		progressed := make(chan float64, 100)
		// A length of sleep no other test uses, to count the commands.
		const command = "sleep 119.7"
		// Ten targets: every stop is verified with control sessions of its
		// own, and 22 at once on a loaded 2-core host is a load test.
		p, err := s.client.StartTool(context.Background(), "ssh_exec_many", map[string]any{"targets": []string{"m1*"}, "command": command, "max_parallel": 10},
			func(n mcp.ProgressNotificationParams) {
				select {
				case progressed <- n.Total:
				default:
				}
			})
		if err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, time.Minute, "10 commands running on the host", func() bool {
			out, _ := exec.Command("pgrep", "-c", "-u", s.sshd.User, "-f", "^"+command+"$").Output()
			return strings.TrimSpace(string(out)) == "10"
		})
		select {
		case total := <-progressed:
			if total != 10 {
				t.Errorf("progress total %v; want 10 targets", total)
			}
		case <-time.After(time.Minute):
			t.Errorf("no progress in a minute")
		}
		before := len(auditRecords(t, s.state))
		if err := s.client.Cancel(p.ID(), "test"); err != nil {
			t.Fatal(err)
		}
		s.promptly(t)
		testenv.WaitFor(t, time.Minute, "every outcome", func() bool {
			n := 0
			for _, rec := range auditRecords(t, s.state)[before:] {
				if rec.Kind == audit.KindOutcome && rec.Tool == "ssh_exec" && rec.Parent != "" {
					n++
				}
			}
			return n == 10
		})
		for _, rec := range auditRecords(t, s.state)[before:] {
			if rec.Kind == audit.KindOutcome && rec.Parent != "" && (rec.Status != "cancelled" || rec.RemoteStopped == nil || !*rec.RemoteStopped) {
				t.Errorf("%s: %s, remote_stopped %v (%s); want cancelled and verified gone", rec.Target, rec.Status, *rec.RemoteStopped, rec.Reason)
			}
		}
	})
	s.assertNoSecretIn(t, s.token)
}

// TestServeExecManyBackground: a fan-out in the background runs its
// targets within max_background_actions (its own slot and the free ones),
// so that it cannot take every slot of the server from the calls that
// wait for their actions. Each command logs its start and end to one file
// on the host; the most running at once is read from it afterwards, so no
// moment is sampled.
func TestServeExecManyBackground(t *testing.T) {
	var b strings.Builder
	for i := range 6 {
		b.WriteString(fleetTarget(fmt.Sprintf("b%d", i), `cwd = "@USERDIR@"`))
	}
	s := startServedWith(t, servedOptions{tables: b.String(), server: "max_background_actions = 2\nmax_concurrent_actions = 16"})
	_, out := s.many(t, map[string]any{"targets": []string{"b[0-9]"}, "command": "echo + >> log; sleep 0.5; echo - >> log", "max_parallel": 6, "wait_s": 0})
	if out.Status != "running" {
		t.Fatalf("wait_s 0: %+v", out)
	}
	// A call that waits for its action still runs.
	s.promptly(t)
	r := s.call(t, "action_status", map[string]any{"handle": out.Handle, "wait_s": 60})
	if done := decode[gateway.SSHExecManyOutput](t, r); done.Status != "done" || done.Summary.ExitedOK != 6 {
		t.Fatalf("the fan-out: %s", resultText(r))
	}
	running, most := 0, 0
	for _, line := range strings.Fields(string(readLocal(t, filepath.Join(s.userDir, "log")))) {
		if line == "+" {
			running++
		} else {
			running--
		}
		most = max(most, running)
	}
	if most > 2 {
		t.Errorf("%d targets of a background fan-out ran at once; max_background_actions is 2", most)
	}
}

// TestServeExecManyFits runs a command whose output differs on each of 100
// targets: the result fits result_bytes, leaving out the smallest groups
// honestly, and every target's handle is in it.
func TestServeExecManyFits(t *testing.T) {
	var b strings.Builder
	for i := range 100 {
		b.WriteString(fleetTarget(fmt.Sprintf("t%03d", i), fmt.Sprintf(`env = { ID = "t%03d" }`, i)))
	}
	const budget = 16384
	s := startServedWith(t, servedOptions{tables: b.String(), server: fmt.Sprintf("result_bytes = %d\nmax_parallel = 10", budget)})
	r, out := s.many(t, map[string]any{"targets": []string{"t*"}, "command": "echo $ID; seq 1 200"})
	raw, _ := json.Marshal(r)
	shown := len(out.Groups)
	if out.Omitted != nil {
		shown += out.Omitted.Groups
	}
	if r.IsError || out.Summary.ExitedOK != 100 || shown != 100 || len(out.Handles) != 100 || out.Omitted == nil || out.Omitted.Targets != 100-len(out.Groups) {
		t.Fatalf("100 groups: %d shown, omitted %+v, %d handles\n%s", len(out.Groups), out.Omitted, len(out.Handles), resultText(r))
	}
	if len(raw) > budget {
		t.Errorf("the result is %d bytes; result_bytes is %d", len(raw), budget)
	}
	if text := resultText(r); !strings.Contains(text, fmt.Sprintf("%d groups, the smallest (%d targets), are not shown", out.Omitted.Groups, out.Omitted.Targets)) {
		t.Errorf("the text does not say what was left out: %s", text)
	}
	// Every handle answers, the groups left out included.
	for name, h := range out.Handles {
		r := s.call(t, "action_status", map[string]any{"handle": h})
		if st := decode[gateway.SSHExecOutput](t, r); st.Target != name || st.Stdout.Head == "" {
			t.Fatalf("action_status of %s: %s", name, resultText(r))
		}
	}
}
