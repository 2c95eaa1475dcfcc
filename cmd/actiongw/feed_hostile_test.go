//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/feed"
	"github.com/actiongw/actiongw/internal/output"
)

// readAll is the whole stdout of handle as read_output gives the agent.
func (s *served) readAll(t *testing.T, handle string) string {
	t.Helper()
	page := s.call(t, "read_output", map[string]any{"handle": handle, "stream": "stdout", "limit": 1 << 20})
	b, _ := json.Marshal(page.StructuredContent)
	var p output.Page
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return p.Data
}

// TestFeedHostileOutput: what a console is sent of an action is what the
// agent gets, never more: a secret a host holds comes as the agent's
// marker, also split across writes, and markup and terminal escapes in a
// command and its output come verbatim, as data (the page escapes them).
func TestFeedHostileOutput(t *testing.T) {
	s := startServedWith(t, servedOptions{})
	wd := watch(t, s.state)
	wd.snapshotUntil(t, "the serve", func(s feed.Snapshot) bool { return len(s.Serves) == 1 })
	tok := filepath.Join(s.sshd.UserDir(t), "tok")
	if err := os.WriteFile(tok, []byte(s.token), 0o644); err != nil {
		t.Fatal(err)
	}
	half := len(s.token) / 2
	markup := `<img src=x onerror=alert(1)><script>alert(2)</script>`
	for _, command := range []string{
		"cat " + tok,
		fmt.Sprintf("printf %%s %s; sleep 0.3; printf %%s %s", s.token[:half], s.token[half:]),
		fmt.Sprintf("for i in 1 2 3; do printf 'x%%s' $i; cat %s; sleep 0.1; done", tok),
		fmt.Sprintf(`printf '%%s\033[2J\342\200\256\n' '%s'; echo "%s" `, markup, markup),
	} {
		h := s.startBackground(t, "box", command)
		got := wd.outputOf(t, h, "stdout", "")
		want := s.readAll(t, h)
		if got != want {
			t.Errorf("%s: the console got %q; the agent %q", command, got, want)
		}
		if strings.Contains(got, s.token) || strings.Contains(got, s.token[:half+4]) || strings.Contains(got, s.token[half-4:]) {
			t.Errorf("%s: the console got the token: %q", command, got)
		}
		a := findAction(wd.w.Snapshot(), h)
		if a == nil || a.What != command {
			t.Errorf("%s: the console's action: %+v; want the command verbatim", command, a)
		}
	}
	s.client.Close()
	s.assertNoSecretIn(t, s.token)
}

// TestFeedHostileConsole: a console that sends garbage or a frame over
// the limit is dropped without harm to serve; one that never reads does
// not slow an action that streams a lot of output nor grow serve's
// memory, and when it reads again it is told what it missed and sent a
// fresh snapshot. The agent reaches no socket through a tool.
func TestFeedHostileConsole(t *testing.T) {
	s := startServedWith(t, servedOptions{})
	wd := watch(t, s.state)
	id := wd.snapshotUntil(t, "the serve", func(s feed.Snapshot) bool { return len(s.Serves) == 1 }).Serves[0].ID
	sock := filepath.Join(feed.Dir(s.state), id+".sock")

	t.Run("garbage and oversize frames", func(t *testing.T) {
		for name, frame := range map[string]string{
			"garbage":         "\x00\x01{not json\n",
			"unknown field":   `{"id":1,"stop":{"handle":"x"},"exec":"rm -rf /"}` + "\n",
			"no id":           `{"stop":{"handle":"x"}}` + "\n",
			"stop and answer": `{"id":1,"stop":{"handle":"x"},"answer":{"question":"q","answer":"approve"}}` + "\n",
			"oversize":        `{"id":1,"stop":{"handle":"` + strings.Repeat("a", 64<<10) + `"}}` + "\n",
		} {
			c, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			c.Write([]byte(frame))
			// Dropped: what it reads ends (after the snapshot) within the
			// deadline.
			c.SetReadDeadline(time.Now().Add(time.Minute))
			sc := bufio.NewScanner(c)
			sc.Buffer(nil, 16<<20)
			for sc.Scan() {
			}
			if ne, ok := sc.Err().(net.Error); ok && ne.Timeout() {
				t.Errorf("%s: the console was not dropped", name)
			}
			c.Close()
		}
		// serve goes on, and the Watcher still follows it.
		r := s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "echo still here"})
		h := decode[gateway.SSHExecOutput](t, r).Handle
		wd.until(t, "an action after the garbage", func(ev feed.Event) bool { return ev.Action != nil && ev.Action.Handle == h })
	})

	t.Run("a console that never reads", func(t *testing.T) {
		stalled, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer stalled.Close()
		// About 30 MB on each stream over some 15 s: far more than a
		// console's queue holds, even at the rate the feed sends output.
		r := s.call(t, "ssh_exec", map[string]any{"target": "box", "timeout_s": 120, "wait_s": 120,
			"command": "for i in $(seq 1 300); do head -c 100000 /dev/zero | tr '\\0' a; head -c 100000 /dev/zero | tr '\\0' b >&2; sleep 0.05; done"})
		out := decode[gateway.SSHExecOutput](t, r)
		if out.Status != "exited" || out.Stdout.Bytes != 30_000_000 {
			t.Fatalf("the action beside a stalled console: %s", resultText(r))
		}
		if rss := vmKB(t, s.client.Pid(), "VmHWM"); rss > 200<<10 {
			t.Errorf("serve's peak RSS %d KiB with a console that does not read; want under 200 MiB", rss)
		}
		// Read again, it learns it missed events, then gets a snapshot.
		stalled.SetReadDeadline(time.Now().Add(time.Minute))
		sc := bufio.NewScanner(stalled)
		sc.Buffer(nil, 16<<20)
		missed := 0
		for sc.Scan() {
			var f struct {
				Event    *feed.Event    `json:"event"`
				Snapshot *feed.Snapshot `json:"snapshot"`
			}
			if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
				t.Fatal(err)
			}
			if f.Event != nil && f.Event.Missed > 0 {
				missed = f.Event.Missed
			}
			if f.Snapshot != nil && missed > 0 {
				if findAction(*f.Snapshot, out.Handle) == nil {
					t.Errorf("the fresh snapshot lacks the action")
				}
				return
			}
		}
		t.Fatalf("no Missed then snapshot on the stalled console: %v (missed %d)", sc.Err(), missed)
	})

	t.Run("no tool reaches a socket", func(t *testing.T) {
		for _, handle := range []string{id, id + ".sock", "../console/" + id + ".sock", sock, "console/" + id} {
			for _, tool := range []string{"read_output", "search_output", "action_status", "cancel_action"} {
				args := map[string]any{"handle": handle}
				if tool == "search_output" {
					args["pattern"] = "x"
				}
				if r := s.call(t, tool, args); !r.IsError {
					t.Errorf("%s with handle %q: %s; want a refusal", tool, handle, resultText(r))
				}
			}
		}
		if n := strings.Count(s.stderr.String(), "a console connected"); n != 7 {
			t.Errorf("%d consoles connected; want the Watcher, the 5 garbage ones and the stalled one", n)
		}
	})
}

// vmKB is a field of /proc/pid/status, in KiB.
func vmKB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
