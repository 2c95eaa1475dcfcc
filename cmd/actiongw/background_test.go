//go:build linux

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/internal/testkit/sshtest"
)

// startBackground runs command on box with wait_s 0 and returns its
// handle, checking that it came back running.
func (s *served) startBackground(t *testing.T, target, command string) string {
	t.Helper()
	r := s.call(t, "ssh_exec", map[string]any{"target": target, "command": command, "wait_s": 0})
	out := decode[gateway.SSHExecOutput](t, r)
	if out.Status != gateway.StatusRunning || r.IsError || out.Handle == "" {
		t.Fatalf("ssh_exec with wait_s 0: status %s, isError %v: %s", out.Status, r.IsError, resultText(r))
	}
	for _, want := range []string{"action_status", "cancel_action", `"wait_s":30`, out.Handle} {
		if !strings.Contains(resultText(r), want) {
			t.Errorf("running result's text lacks %q: %s", want, resultText(r))
		}
	}
	return out.Handle
}

// finalStatus waits for the action with handle to end, through
// action_status, and returns its result.
func (s *served) finalStatus(t *testing.T, handle string) gateway.SSHExecOutput {
	t.Helper()
	var out gateway.SSHExecOutput
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		out = decode[gateway.SSHExecOutput](t, s.call(t, "action_status", map[string]any{"handle": handle, "wait_s": 20}))
		if out.Status != gateway.StatusRunning {
			return out
		}
	}
	t.Fatalf("action %s still running after 2 minutes", handle)
	return out
}

// localOutput runs command here, for the bytes a remote run must match.
func localOutput(t *testing.T, command string) []byte {
	t.Helper()
	b, err := exec.Command("sh", "-c", command).Output()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestServeBackground(t *testing.T) {
	s := startServedWith(t, servedOptions{
		server: "max_concurrent_actions = 40\nmax_background_actions = 30",
		tables: `
[ssh.many]
host = "127.0.0.1"
port = @PORT@
user = "@USER@"
key_secret = "box-key"
known_hosts = "@KNOWN_HOSTS@"
max_connections = 4
`,
	})

	t.Run("started in the background, polled to the end", func(t *testing.T) {
		command := "for i in 1 2 3 4 5; do echo line $i; sleep 0.2; done; echo done"
		h := s.startBackground(t, "box", command)
		out := s.finalStatus(t, h)
		want := localOutput(t, "for i in 1 2 3 4 5; do echo line $i; done; echo done")
		if out.Status != gateway.StatusExited || out.ExitCode == nil || *out.ExitCode != 0 ||
			out.Stdout.Bytes != int64(len(want)) || out.Stdout.Lines != 6 || out.Stdout.SHA256 != sha(want) {
			t.Errorf("final: %+v; want exited 0 with %d bytes, 6 lines, sha256 %s", out, len(want), sha(want))
		}
		// Asked again, the finished action answers at once, the same.
		if again := decode[gateway.SSHExecOutput](t, s.call(t, "action_status", map[string]any{"handle": h, "wait_s": 0})); again.Stdout.SHA256 != out.Stdout.SHA256 {
			t.Errorf("action_status again: %+v", again)
		}
	})

	t.Run("action_status sends progress while it waits", func(t *testing.T) {
		h := s.startBackground(t, "box", "for i in 1 2 3 4 5 6 7 8 9 10; do echo tick; sleep 0.15; done")
		var mu sync.Mutex
		var seen []float64
		res, err := s.client.CallTool(context.Background(), "action_status", map[string]any{"handle": h, "wait_s": 60},
			func(p mcp.ProgressNotificationParams) {
				mu.Lock()
				seen = append(seen, p.Progress)
				mu.Unlock()
			})
		if err != nil {
			t.Fatal(err)
		}
		if out := decode[gateway.SSHExecOutput](t, res); out.Status != gateway.StatusExited || out.Stdout.Lines != 10 {
			t.Errorf("action_status: %s", resultText(res))
		}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			t.Error("no progress notification while action_status waited a second and a half")
		}
	})

	t.Run("wait_s expires mid-output", func(t *testing.T) {
		// The command cannot end before a second has passed.
		r := s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "seq 1 50000; sleep 1; seq 50001 100000", "wait_s": 0.3})
		first := decode[gateway.SSHExecOutput](t, r)
		if first.Status != gateway.StatusRunning || first.Stdout.SHA256 != "" || first.ExitCode != nil {
			t.Fatalf("after wait_s: %+v; want running, no sha256 and no exit code yet", first)
		}
		out := s.finalStatus(t, first.Handle)
		want := localOutput(t, "seq 1 100000")
		if out.Stdout.Bytes != int64(len(want)) || out.Stdout.Lines != 100000 || out.Stdout.SHA256 != sha(want) || first.Stdout.Bytes > out.Stdout.Bytes {
			t.Errorf("final stdout %d bytes, %d lines, %s (running: %d bytes); want %d, 100000, %s",
				out.Stdout.Bytes, out.Stdout.Lines, out.Stdout.SHA256, first.Stdout.Bytes, len(want), sha(want))
		}
	})

	t.Run("followed with waiting reads", func(t *testing.T) {
		h := s.startBackground(t, "box", "for i in 1 2 3 4 5; do echo tick $i; sleep 0.3; done")
		var got strings.Builder
		var offset int64
		pages, runningPages := 0, 0
		for {
			p := decode[output.Page](t, s.call(t, "read_output", map[string]any{"handle": h, "stream": "stdout", "offset": offset, "wait_s": 30}))
			pages++
			if p.Running {
				runningPages++
			}
			got.WriteString(p.Data)
			offset = p.NextOffset
			if p.EOF {
				break
			}
			if pages > 200 {
				t.Fatalf("200 pages and no end: %q", got.String())
			}
		}
		if want := "tick 1\ntick 2\ntick 3\ntick 4\ntick 5\n"; got.String() != want || runningPages == 0 {
			t.Errorf("followed %q in %d pages (%d while running); want %q, some while running", got.String(), pages, runningPages, want)
		}
	})

	for _, noisy := range []bool{false, true} {
		t.Run(fmt.Sprintf("cancel_action noisy=%v", noisy), func(t *testing.T) {
			pidFile := filepath.Join("/tmp", "actiongw-bgcancel-"+randomHex(t, 6))
			t.Cleanup(func() { os.Remove(pidFile) })
			command := "echo $$ > " + pidFile + "; exec sleep 60"
			if noisy {
				command = "echo $$ > " + pidFile + "; exec yes"
			}
			h := s.startBackground(t, "box", command)
			pid := waitPID(t, pidFile)
			if noisy {
				until(t, s.client, "output to flow", "action_status", map[string]any{"handle": h, "wait_s": 0}, func(r *mcp.CallToolResult) bool {
					return decode[gateway.SSHExecOutput](t, r).Stdout.Bytes > 0
				})
			}
			out := decode[gateway.SSHExecOutput](t, s.call(t, "cancel_action", map[string]any{"handle": h}))
			if out.Status != gateway.StatusCancelled || out.RemoteStopped == nil || !*out.RemoteStopped || out.Reason != "cancelled by cancel_action" {
				t.Errorf("cancel_action: %+v; want reason \"cancelled by cancel_action\", remote_stopped true", out)
			}
			if !sshtest.WaitGone(pid, 5*time.Second) {
				t.Errorf("remote process %d still running after cancel_action", pid)
			}
			if r := s.call(t, "cancel_action", map[string]any{"handle": h}); !strings.Contains(resultText(r), "already ended") {
				t.Errorf("cancel_action again: %s", resultText(r))
			}
			s.promptly(t)
		})
	}

	t.Run("an HTTP body followed, then cancelled", func(t *testing.T) {
		r := s.call(t, "http_request", map[string]any{"endpoint": "api", "method": "GET", "path": "/slow-body", "wait_s": 0})
		out := decode[gateway.HTTPRequestOutput](t, r)
		if out.Status != gateway.StatusRunning {
			t.Fatalf("http_request wait_s 0: %s", resultText(r))
		}
		p := decode[output.Page](t, s.call(t, "read_output", map[string]any{"handle": out.Handle, "stream": "body", "offset": 0, "wait_s": 30}))
		if !p.Running || !strings.HasPrefix(p.Data, "chunk 0\n") {
			t.Errorf("a waiting read of the running body: %+v", p)
		}
		before := s.began("/slow-body")
		r = s.call(t, "cancel_action", map[string]any{"handle": out.Handle})
		if final := decode[gateway.HTTPRequestOutput](t, r); final.Status != gateway.StatusCancelled || final.Body.SHA256 == "" {
			t.Errorf("cancel_action of the request: %s", resultText(r))
		}
		if s.began("/slow-body") != before {
			t.Errorf("the cancelled request was retried")
		}
	})

	t.Run("foreground call cancelled while it waits", func(t *testing.T) {
		pidFile := filepath.Join("/tmp", "actiongw-fgcancel-"+randomHex(t, 6))
		t.Cleanup(func() { os.Remove(pidFile) })
		p, err := s.client.StartTool(context.Background(), "ssh_exec", map[string]any{"target": "box", "command": "echo $$ > " + pidFile + "; exec sleep 60", "wait_s": 30}, nil)
		if err != nil {
			t.Fatal(err)
		}
		pid := waitPID(t, pidFile)
		if err := s.client.Cancel(p.ID(), "test cancel"); err != nil {
			t.Fatal(err)
		}
		if !sshtest.WaitGone(pid, 5*time.Second) {
			t.Errorf("remote process %d still running after the call was cancelled", pid)
		}
		s.promptly(t)
	})

	t.Run("20 in the background and calls in the foreground", func(t *testing.T) {
		handles := make([]string, 20)
		for i := range handles {
			handles[i] = s.startBackground(t, "many", fmt.Sprintf("sleep 1; echo background %d", i))
		}
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Go(func() {
				r := s.call(t, "ssh_exec", map[string]any{"target": "box", "command": fmt.Sprintf("echo foreground %d", i)})
				if out := decode[gateway.SSHExecOutput](t, r); out.Stdout.Head != fmt.Sprintf("foreground %d\n", i) {
					t.Errorf("foreground call %d: %s", i, resultText(r))
				}
			})
		}
		wg.Wait()
		list := decode[gateway.ListActionsOutput](t, s.call(t, "list_actions", map[string]any{"status": "running"}))
		for _, a := range list.Actions {
			if a.Status != gateway.StatusRunning {
				t.Errorf("list_actions status=running lists %+v", a)
			}
		}
		for i, h := range handles {
			if out := s.finalStatus(t, h); out.Stdout.Head != fmt.Sprintf("background %d\n", i) {
				t.Errorf("background action %d: %+v", i, out)
			}
		}
	})
}

// TestServeBackgroundShutdown: stdin EOF with background actions running
// stops every one of them, records their outcomes, and the server exits 0.
func TestServeBackgroundShutdown(t *testing.T) {
	s := startServed(t, "signal")
	var pids []int
	var commands []string
	for i := range 2 {
		pidFile := filepath.Join("/tmp", fmt.Sprintf("actiongw-bgshutdown-%d-%s", i, randomHex(t, 6)))
		t.Cleanup(func() { os.Remove(pidFile) })
		command := "echo $$ > " + pidFile + "; exec sleep 60"
		s.startBackground(t, "box", command)
		pids = append(pids, waitPID(t, pidFile))
		commands = append(commands, command)
	}
	if err := s.client.Close(); err != nil {
		t.Errorf("server exit with background actions running: %v; want status 0", err)
	}
	for i, pid := range pids {
		if !sshtest.WaitGone(pid, 5*time.Second) {
			t.Errorf("remote process %d survived the server", pid)
		}
		rec := outcomeOf(t, s.state, commands[i])
		if rec.Status != "cancelled" || !strings.Contains(rec.Reason, "shutting down") || rec.RemoteStopped == nil || !*rec.RemoteStopped {
			t.Errorf("outcome %+v; want cancelled by the shutdown with remote_stopped true", rec)
		}
	}
}
