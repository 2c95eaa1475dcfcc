//go:build linux

package main

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
)

// TestServeKilledStopsCommandWithStdin: a command given stdin must be
// stopped by its dead-man switch when serve is killed, also
//   - when it never reads its stdin, given more than a pipe holds: the
//     switch's watcher pumped stdin into the command first, and stuck
//     writing what nobody read, it never got to watch the session;
//   - when a file waits at "/tmp/actiongw-@ID@.in": the wrapper's FIFO was
//     named so, its placeholder never replaced, so every run on a host
//     shared that path, and a file there (left by an earlier run, made by
//     a command the agent ran, or by another user) made mkfifo fail, and
//     every later command with stdin ran without its switch.
func TestServeKilledStopsCommandWithStdin(t *testing.T) {
	for _, tt := range []struct {
		name, stdin, plant string
	}{
		{"stdin unread", strings.Repeat("x", 1_000_000), ""},
		{"planted FIFO", "x", "/tmp/actiongw-@ID@.in"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := startServed(t, "signal")
			if tt.plant != "" {
				t.Cleanup(func() { os.Remove(tt.plant) })
				if r := s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "mkfifo '" + tt.plant + "'"}); r.IsError {
					t.Fatalf("planting %s: %s", tt.plant, resultText(r))
				}
			}
			pidFile := remotePIDFile(t)
			args := map[string]any{"target": "box", "command": "echo $$ > " + pidFile + "; exec sleep 1000", "stdin": tt.stdin}
			if _, err := s.client.StartTool(context.Background(), "ssh_exec", args, nil); err != nil {
				t.Fatal(err)
			}
			pid := waitPID(t, pidFile)
			if err := syscall.Kill(s.client.Pid(), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if !sshtest.WaitGone(pid, 60*time.Second) {
				t.Errorf("command %d still runs on the target after serve was killed: its dead-man switch did not stop it", pid)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		})
	}
}
