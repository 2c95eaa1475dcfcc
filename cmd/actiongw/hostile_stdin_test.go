//go:build linux

package main

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/sshtest"
)

// TestServeKilledStopsCommandWithUnreadStdin: a command that never reads
// its stdin, given more stdin than a pipe holds, must still be stopped by
// the dead-man switch when serve is killed. The switch's watcher pumps
// stdin into the command first; stuck writing what nobody reads, it never
// got to watch the session, and the command outlived its gateway.
func TestServeKilledStopsCommandWithUnreadStdin(t *testing.T) {
	s := startServed(t, "signal")
	pidFile := remotePIDFile(t)
	args := map[string]any{"target": "box", "command": "echo $$ > " + pidFile + "; exec sleep 1000",
		"stdin": strings.Repeat("x", 1_000_000)}
	if _, err := s.client.StartTool(context.Background(), "ssh_exec", args, nil); err != nil {
		t.Fatal(err)
	}
	pid := waitPID(t, pidFile)
	if err := syscall.Kill(s.client.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !sshtest.WaitGone(pid, 60*time.Second) {
		t.Errorf("command %d, which read none of its stdin, still runs on the target after serve was killed", pid)
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestServeKilledStopsCommandDespitePlantedFIFO: the wrapper's FIFO for
// stdin was named "actiongw-@ID@.in", its placeholder never replaced, so
// every run on a host shared one path in $TMPDIR. A file there (left by an
// earlier run, made by a command the agent ran, or by another user) made
// mkfifo fail, and every later command with stdin ran without its dead-man
// switch: killing serve left it running.
func TestServeKilledStopsCommandDespitePlantedFIFO(t *testing.T) {
	s := startServed(t, "signal")
	planted := "/tmp/actiongw-@ID@.in"
	t.Cleanup(func() { os.Remove(planted) })
	if r := s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "mkfifo '" + planted + "'"}); r.IsError {
		t.Fatalf("planting %s: %s", planted, resultText(r))
	}
	pidFile := remotePIDFile(t)
	args := map[string]any{"target": "box", "command": "echo $$ > " + pidFile + "; exec sleep 1000", "stdin": "x"}
	if _, err := s.client.StartTool(context.Background(), "ssh_exec", args, nil); err != nil {
		t.Fatal(err)
	}
	pid := waitPID(t, pidFile)
	if err := syscall.Kill(s.client.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !sshtest.WaitGone(pid, 60*time.Second) {
		t.Errorf("command %d still runs on the target after serve was killed: its dead-man switch was not armed", pid)
		syscall.Kill(pid, syscall.SIGKILL)
	}
}
