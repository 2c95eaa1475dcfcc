//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/feed"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// watched is a feed.Watcher over a test's state directory, with the
// events it delivered so far.
type watched struct {
	w      *feed.Watcher
	events chan feed.Event
}

// watch starts a Watcher on state, stopped and waited for at cleanup.
func watch(t testing.TB, state string) *watched {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := feed.Watch(ctx, state)
	t.Cleanup(func() {
		cancel()
		w.Wait()
	})
	return &watched{w: w, events: make(chan feed.Event)}
}

// until waits (a minute at most) for an event for which ok holds, and
// returns it; events before it are passed to seen, if set.
func (wd *watched) until(t testing.TB, what string, ok func(feed.Event) bool) feed.Event {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case ev, open := <-wd.w.Events():
			if !open {
				t.Fatalf("waiting for %s: the Watcher's events ended", what)
			}
			if ok(ev) {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s within a minute; the view: %+v", what, wd.w.Snapshot())
		}
	}
}

// snapshotUntil polls the Watcher's Snapshot (a minute at most) until ok
// holds, and returns it.
func (wd *watched) snapshotUntil(t testing.TB, what string, ok func(feed.Snapshot) bool) feed.Snapshot {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s := wd.w.Snapshot()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot with %s within a minute; the last: %+v", what, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func serveIDs(s feed.Snapshot) map[int]string {
	ids := map[int]string{}
	for _, sv := range s.Serves {
		ids[sv.PID] = sv.ID
	}
	return ids
}

func TestFeedWatcher(t *testing.T) {
	s := startServedWith(t, servedOptions{})
	first := s.client.Pid()
	// A socket left by a serve that died is not a serve.
	stale := filepath.Join(feed.Dir(s.state), "999999999.1.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	wd := watch(t, s.state)
	// With the client's name, from its initialize.
	snap := wd.snapshotUntil(t, "the serve started before the Watcher", func(s feed.Snapshot) bool {
		return len(s.Serves) == 1 && s.Serves[0].PID == first && s.Serves[0].Client == "actiongw-host"
	})

	t.Run("socket private", func(t *testing.T) {
		dir := feed.Dir(s.state)
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("console folder: %v, mode %v; want 0700", err, fi.Mode().Perm())
		}
		sock := filepath.Join(dir, serveIDs(snap)[first]+".sock")
		fi, err = os.Stat(sock)
		if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
			t.Fatalf("socket %s: %v, mode %v; want a socket, 0600", sock, err, fi.Mode())
		}
	})

	t.Run("a serve started later", func(t *testing.T) {
		second := s.startServer(t, s.stderr)
		wd.snapshotUntil(t, "the serve started after the Watcher", func(s feed.Snapshot) bool {
			ids := serveIDs(s)
			return ids[first] != "" && ids[second.Pid()] != ""
		})
		r := decode[struct{ Handle string }](t, s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "echo from the first"}))
		ev := wd.until(t, "the first serve's action ending", func(ev feed.Event) bool {
			return ev.Action != nil && ev.Action.Handle == r.Handle && !ev.Action.Ended.IsZero()
		})
		if a := ev.Action; a.Serve != serveIDs(snap)[first] || a.Tool != "ssh_exec" || a.Target != "box" || a.What != "echo from the first" || a.Status != "exited" {
			t.Errorf("action: %+v", a)
		}

		// Killed, the second is dropped, and its socket removed.
		id := serveIDs(wd.w.Snapshot())[second.Pid()]
		if err := syscall.Kill(second.Pid(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		wd.until(t, "the killed serve gone", func(ev feed.Event) bool { return ev.ServeGone == id })
		if got := serveIDs(wd.w.Snapshot()); got[second.Pid()] != "" || got[first] == "" {
			t.Errorf("serves after the kill: %v; want only the first", got)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			if _, err := os.Stat(filepath.Join(feed.Dir(s.state), id+".sock")); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the killed serve's socket is still there after a minute")
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale socket of a dead process: %v; want removed", err)
	}
}

// outputOf collects the output pieces of handle's stream until its
// action ends, checking that they follow one another, and returns them
// joined, after the pieces seen before.
func (wd *watched) outputOf(t testing.TB, handle, stream, before string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(before)
	wd.until(t, "the action's end", func(ev feed.Event) bool {
		if o := ev.Output; o != nil && o.Handle == handle && o.Stream == stream {
			if o.Offset != int64(b.Len()) {
				t.Errorf("piece at offset %d; want %d (no gap at this rate)", o.Offset, b.Len())
			}
			b.WriteString(o.Data)
		}
		return ev.Action != nil && ev.Action.Handle == handle && !ev.Action.Ended.IsZero()
	})
	return b.String()
}

func TestFeedOutputAndStop(t *testing.T) {
	s := startServedWith(t, servedOptions{})
	wd := watch(t, s.state)
	serve := wd.snapshotUntil(t, "the serve", func(s feed.Snapshot) bool { return len(s.Serves) == 1 }).Serves[0].ID

	t.Run("output as it arrives", func(t *testing.T) {
		command := "for i in 1 2 3 4 5; do echo line $i; echo err $i >&2; sleep 0.2; done"
		h := s.startBackground(t, "box", command)
		// The first line shows while the action runs.
		first := wd.until(t, "the first line", func(ev feed.Event) bool {
			return ev.Output != nil && ev.Output.Handle == h && ev.Output.Stream == "stdout"
		}).Output
		if first.Offset != 0 || !strings.HasPrefix(first.Data, "line 1\n") {
			t.Fatalf("first piece: %+v; want line 1 at offset 0", first)
		}
		if a := findAction(wd.w.Snapshot(), h); a == nil || a.Status != "running" || !a.Background {
			t.Errorf("while it runs: %+v; want running, in the background", a)
		}
		if got, want := wd.outputOf(t, h, "stdout", first.Data), string(localOutput(t, "for i in 1 2 3 4 5; do echo line $i; done")); got != want {
			t.Errorf("stdout in the feed: %q; want %q", got, want)
		}
		if a := findAction(wd.w.Snapshot(), h); a == nil || a.Status != "exited" || a.Ended.IsZero() {
			t.Errorf("ended: %+v", a)
		}
	})

	t.Run("stop", func(t *testing.T) {
		h := s.startBackground(t, "box", "sleep 120")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := wd.w.Stop(ctx, serve, h)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != "cancelled" || !res.RemoteStopped || !strings.Contains(res.Reason, "console") {
			t.Errorf("stop: %+v; want cancelled, remote_stopped, the reason naming the console", res)
		}
		ev := wd.until(t, "the stopped action's end", func(ev feed.Event) bool {
			return ev.Action != nil && ev.Action.Handle == h && !ev.Action.Ended.IsZero()
		})
		if a := ev.Action; a.RemoteStopped == nil || !*a.RemoteStopped || a.StopReason != res.Reason {
			t.Errorf("ended: %+v; want remote_stopped and the reason %q", a, res.Reason)
		}
		// The agent sees the same end.
		if out := s.finalStatus(t, h); out.Status != "cancelled" || out.RemoteStopped == nil || !*out.RemoteStopped {
			t.Errorf("action_status after the console's stop: %+v", out)
		}
		// Stopped again: it had ended, nothing is stopped.
		again, err := wd.w.Stop(ctx, serve, h)
		if err != nil || again.Status != "cancelled" || !strings.Contains(again.Reason, "already ended") {
			t.Errorf("stop again: %+v, %v", again, err)
		}
		var re *feed.RequestError
		if _, err := wd.w.Stop(ctx, serve, "no-such-handle"); !errors.As(err, &re) {
			t.Errorf("stop of an unknown handle: %v; want a *feed.RequestError", err)
		}
		if _, err := wd.w.Stop(ctx, "123.456", h); !errors.Is(err, feed.ErrServeGone) {
			t.Errorf("stop at an unknown serve: %v; want ErrServeGone", err)
		}
	})
}

func findAction(s feed.Snapshot, handle string) *feed.Action {
	for i := range s.Actions {
		if s.Actions[i].Handle == handle {
			return &s.Actions[i]
		}
	}
	return nil
}

// consoleCall runs an ssh_exec on the target with command through call in
// the background, and returns where its result will arrive.
func consoleCall(call func(string, map[string]any) *mcp.CallToolResult, target, command string) <-chan *mcp.CallToolResult {
	done := make(chan *mcp.CallToolResult, 1)
	go func() { done <- call("ssh_exec", map[string]any{"target": target, "command": command}) }()
	return done
}

// question waits for the question whose text holds what.
func (wd *watched) question(t testing.TB, what string) feed.Question {
	t.Helper()
	return *wd.until(t, "the question about "+what, func(ev feed.Event) bool {
		return ev.Question != nil && strings.Contains(ev.Question.Text, what)
	}).Question
}

// withVia writes a copy of s's config whose [approval] via is via.
func withVia(t *testing.T, s *served, via string) string {
	b, err := os.ReadFile(s.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), `via = "console"`, fmt.Sprintf("via = %q", via), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFeedApprovals(t *testing.T) {
	s := startApprovals(t, `via = "console"`)
	wd := watch(t, s.state)
	serve := wd.snapshotUntil(t, "the serve", func(s feed.Snapshot) bool { return len(s.Serves) == 1 }).Serves[0].ID
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// s.client declares no elicitation: with via console it is never asked.
	call := func(tool string, args map[string]any) *mcp.CallToolResult { return s.call(t, tool, args) }

	t.Run("approved in the console", func(t *testing.T) {
		var mu sync.Mutex
		var progress []string
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			r, err := s.client.CallTool(context.Background(), "ssh_exec", map[string]any{"target": "always", "command": "echo console-approved"},
				func(p mcp.ProgressNotificationParams) {
					mu.Lock()
					progress = append(progress, p.Message)
					mu.Unlock()
				})
			if err != nil {
				t.Error(err)
			}
			done <- r
		}()
		q := wd.question(t, "echo console-approved")
		if q.Serve != serve || q.Asked != "command" || q.Tool != "ssh_exec" || q.Target != "always" || q.Remember != 10*time.Minute || q.Expires.Sub(q.AskedAt) > 2*time.Minute+time.Second {
			t.Errorf("question: %+v", q)
		}
		if got := wd.w.Snapshot().Questions; len(got) != 1 || got[0].ID != q.ID {
			t.Errorf("questions waiting: %+v; want this one", got)
		}
		// An answer the question does not offer is refused; the right
		// one is taken once.
		if err := wd.w.Answer(ctx, serve, q.ID, "maybe"); err == nil {
			t.Error("answer maybe: taken")
		}
		if err := wd.w.Answer(ctx, serve, q.ID, feed.Approve); err != nil {
			t.Fatal(err)
		}
		var re *feed.RequestError
		if err := wd.w.Answer(ctx, serve, q.ID, feed.Approve); !errors.As(err, &re) {
			t.Errorf("second answer: %v; want a *feed.RequestError", err)
		}
		wd.until(t, "the question gone", func(ev feed.Event) bool { return ev.QuestionGone == q.ID })
		r := <-done
		if r == nil || r.IsError || !strings.Contains(resultText(r), "console-approved") {
			t.Fatalf("approved in the console: %v", r)
		}
		mu.Lock()
		if len(progress) == 0 || !strings.Contains(progress[0], "in the console") {
			t.Errorf("progress while it waited: %q; want it to say it waits for the person in the console", progress)
		}
		mu.Unlock()
		in := intentOf(t, s.state, "echo console-approved")
		if len(in.Approvals) != 1 || in.Approvals[0].Answer != "approve" || in.Approvals[0].Via != "console" {
			t.Errorf("intent: %+v; want approved via console", in.Approvals)
		}
	})

	t.Run("declined in the console", func(t *testing.T) {
		cmd := fmt.Sprintf("touch %s/console-declined", s.userDir)
		done := consoleCall(call, "always", cmd)
		q := wd.question(t, cmd)
		if err := wd.w.Answer(ctx, serve, q.ID, feed.Deny); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if !r.IsError || !strings.Contains(resultText(r), "the person at the console declined it") {
			t.Errorf("declined: %s", resultText(r))
		}
		if _, err := os.Stat(filepath.Join(s.userDir, "console-declined")); err == nil {
			t.Error("the declined command ran")
		}
		in := intentOf(t, s.state, cmd)
		if len(in.Approvals) != 1 || in.Approvals[0].Answer != "decline" || in.Approvals[0].Via != "console" || in.Decision != "deny" {
			t.Errorf("intent: %+v; want declined via console", in)
		}
		if out := outcomeOfHandle(t, s.state, in); out.Status != "denied" {
			t.Errorf("outcome: %+v; want denied", out)
		}
	})

	t.Run("markup and escapes in the question", func(t *testing.T) {
		cmd := "echo '<img src=x onerror=alert(1)><script>alert(2)</script>' \x1b[2J \u202e"
		done := consoleCall(call, "always", cmd)
		q := wd.question(t, "<img src=x onerror=alert(1)><script>alert(2)</script>")
		// The text elicitation shows: the command quoted, its escapes
		// written out, nothing of it interpreted on this side.
		if !strings.Contains(q.Text, `\x1b[2J \u202e`) || strings.ContainsAny(q.Text, "\x1b\u202e") {
			t.Errorf("question text %q; want the markup verbatim and the escapes quoted", q.Text)
		}
		if err := wd.w.Answer(ctx, serve, q.ID, feed.Deny); err != nil {
			t.Fatal(err)
		}
		if r := <-done; !r.IsError {
			t.Errorf("declined: %s", resultText(r))
		}
	})

	t.Run("either", func(t *testing.T) {
		cfg := withVia(t, s, "either")
		p := newPerson()
		either := hostClient(t, s, cfg, p)
		// The console answers first: the client's question is withdrawn.
		p.answers <- nil
		done := consoleCall(either, "always", "echo either-console")
		q := wd.question(t, "echo either-console")
		if err := wd.w.Answer(ctx, q.Serve, q.ID, feed.Approve); err != nil {
			t.Fatal(err)
		}
		if r := <-done; r.IsError {
			t.Fatalf("either, the console answering: %s", resultText(r))
		}
		if n, _ := p.questions(); n != 1 {
			t.Errorf("the client was asked %d questions; want 1", n)
		}
		if in := intentOf(t, s.state, "echo either-console"); len(in.Approvals) != 1 || in.Approvals[0].Via != "console" {
			t.Errorf("intent: %+v; want via console", in.Approvals)
		}
		// The client answers first: the console's question goes.
		p.answers <- decided("approve")
		done = consoleCall(either, "always", "echo either-client")
		q = wd.question(t, "echo either-client")
		wd.until(t, "the console's question withdrawn", func(ev feed.Event) bool { return ev.QuestionGone == q.ID })
		if r := <-done; r.IsError {
			t.Fatalf("either, the client answering: %s", resultText(r))
		}
		if in := intentOf(t, s.state, "echo either-client"); len(in.Approvals) != 1 || in.Approvals[0].Via != "client" || in.Approvals[0].Answer != "approve" {
			t.Errorf("intent: %+v; want approved via client", in.Approvals)
		}
	})
}

// TestFeedLateConsole: a console that connects while an action runs is
// sent the end of what it printed before, at its offset in the stream,
// redacted, not only what comes after.
func TestFeedLateConsole(t *testing.T) {
	s := startServedWith(t, servedOptions{})
	h := s.startBackground(t, "box", `seq 1 2000; printf 'and the token %s\n' `+s.token+`; for i in $(seq 1 300); do echo early $i; done; sleep 600`)
	var total int64
	testenv.WaitFor(t, time.Minute, "the early output kept", func() bool {
		p := decode[gateway.Page](t, s.call(t, "read_output", map[string]any{"handle": h, "stream": "stdout", "offset": -100, "from": "end"}))
		total = p.TotalBytes
		return strings.HasSuffix(p.Data, "early 300\n")
	})
	wd := watch(t, s.state)
	got := wd.until(t, "the earlier output", func(ev feed.Event) bool {
		return ev.Output != nil && ev.Output.Handle == h && ev.Output.Stream == "stdout"
	}).Output
	if !strings.HasSuffix(got.Data, "early 300\n") || !strings.Contains(got.Data, "2000\nand the token [REDACTED:api-token]\nearly 1\n") || got.Offset+int64(len(got.Data)) != total ||
		got.Offset == 0 || len(got.Data) > feed.RecentBytes {
		t.Errorf("the late console got %d bytes at %d: …%q; want the last of the %d bytes, redacted, at their offset",
			len(got.Data), got.Offset, got.Data[max(0, len(got.Data)-80):], total)
	}
	if strings.Contains(got.Data, s.token) {
		t.Error("the late console got the token")
	}
	s.call(t, "cancel_action", map[string]any{"handle": h})
}
