//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/sshtest"
	"github.com/actiongw/actiongw/internal/testenv"
)

// remotePIDFile is a file for a remote command to write its pid to, removed
// at cleanup.
func remotePIDFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join("/tmp", "actiongw-crash-"+randomHex(t, 6))
	t.Cleanup(func() { os.Remove(path) })
	return path
}

// TestServeKilledStopsRemoteWork kills serve with SIGKILL while a silent
// and a noisy command run: nothing on the client side is left to stop them,
// so the remote dead-man switch must, and the commands are gone.
func TestServeKilledStopsRemoteWork(t *testing.T) {
	s := startServed(t, "signal")
	silentPID, noisyPID := remotePIDFile(t), remotePIDFile(t)
	for _, command := range []string{
		"echo $$ > " + silentPID + "; exec sleep 1000",
		"echo $$ > " + noisyPID + "; while :; do echo noise; done",
	} {
		if _, err := s.client.StartTool(context.Background(), "ssh_exec", map[string]any{"target": "box", "command": command}, nil); err != nil {
			t.Fatal(err)
		}
	}
	pids := map[string]int{"silent": waitPID(t, silentPID), "noisy": waitPID(t, noisyPID)}
	if err := syscall.Kill(s.client.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for name, pid := range pids {
		if !sshtest.WaitGone(pid, 60*time.Second) {
			t.Errorf("%s command %d still runs on the target after serve was killed", name, pid)
		}
	}
}

// TestServeStopsEscapees times out a command whose child left its process
// group and session: remote_stopped is true only because that child is gone
// too.
func TestServeStopsEscapees(t *testing.T) {
	s := startServed(t, "signal")
	pidFile := remotePIDFile(t)
	r := s.call(t, "ssh_exec", map[string]any{"target": "box", "timeout_s": 2,
		"command": "setsid sleep 4003 & echo $! > " + pidFile + "; echo started; sleep 1000"})
	out := decode[gateway.SSHExecOutput](t, r)
	pid := waitPID(t, pidFile)
	if out.Status != "timeout" || out.RemoteStopped == nil || !*out.RemoteStopped {
		t.Errorf("status %s remote_stopped %v (%s); want timeout, stopped and verified", out.Status, out.RemoteStopped, out.Reason)
	}
	if !sshtest.WaitGone(pid, 10*time.Second) {
		t.Errorf("the setsid child %d still runs, and the result says %v", pid, *out.RemoteStopped)
	}
}

// TestServeTargetQueue fills the sessions of one target: more calls to it
// wait without holding a server slot, so a call to another endpoint is
// served, and those that find no session within queue_wait are answered
// busy and audited as not started, never as a timeout. With a second
// connection allowed, the same calls run.
func TestServeTargetQueue(t *testing.T) {
	for _, tc := range []struct {
		name        string
		connections int
		queueWait   string
		wantBusy    bool
	}{
		{"one connection", 1, "2s", true},
		{"a second connection", 2, "30s", false}, // generous: a loaded machine dials slowly
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServedWith(t, servedOptions{
				server: fmt.Sprintf("max_concurrent_actions = 4\nqueue_wait = %q", tc.queueWait),
				// Two sessions per connection: one runs, one stays free to stop it.
				tables: fmt.Sprintf("[ssh.narrow]\nhost = \"127.0.0.1\"\nport = @PORT@\nuser = \"@USER@\"\nkey_secret = \"box-key\"\nknown_hosts = \"@KNOWN_HOSTS@\"\nmax_sessions = 2\nmax_connections = %d\n", tc.connections),
			})
			release := remotePIDFile(t) // the long command ends when this file appears
			long := s.start(t, "ssh_exec", map[string]any{"target": "narrow", "command": "while [ ! -e " + release + " ]; do sleep 0.1; done; echo long done"})
			testenv.WaitFor(t, 20*time.Second, "the long command to run", func() bool { return s.health(t).ActiveActions == 1 })

			var wg sync.WaitGroup
			results := make([]*mcp.CallToolResult, 3)
			for i := range results {
				wg.Go(func() {
					results[i] = s.call(t, "ssh_exec", map[string]any{"target": "narrow", "command": fmt.Sprintf("echo queued %d", i)})
				})
			}
			// Another endpoint is served meanwhile: the queued calls hold no server slot.
			if r := s.call(t, "http_request", map[string]any{"endpoint": "api", "method": "GET", "path": "/"}); r.IsError {
				t.Errorf("http_request while the target's calls queue: %s", resultText(r))
			}
			wg.Wait()
			os.WriteFile(release, nil, 0o644)
			if r, err := long.WaitTool(context.Background()); err != nil || r.IsError {
				t.Errorf("the long command: %v %v", err, r)
			}
			for i, r := range results {
				text := resultText(r)
				switch {
				case tc.wantBusy && (!r.IsError || !strings.Contains(text, "did not start: busy")):
					t.Errorf("queued call %d: %s; want busy, did not start", i, text)
				case !tc.wantBusy && r.IsError:
					t.Errorf("call %d with a second connection allowed: %s; want it run", i, text)
				case strings.Contains(text, "timeout"):
					t.Errorf("call %d reported as a timeout: %s", i, text)
				}
			}
			log := readAuditLog(t, s.state)
			if n := strings.Count(log, `"status":"busy"`); tc.wantBusy && n == 0 {
				t.Errorf("no busy outcome in the audit log")
			}
			if strings.Contains(log, `"status":"timeout"`) {
				t.Errorf("a call is audited as a timeout:\n%s", log)
			}
		})
	}
}

// start starts a tool call and returns its pending result.
func (s *served) start(t *testing.T, name string, args map[string]any) interface {
	WaitTool(context.Context) (*mcp.CallToolResult, error)
} {
	t.Helper()
	p, err := s.client.StartTool(context.Background(), name, args, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// health calls the health tool.
func (s *served) health(t *testing.T) healthOut {
	t.Helper()
	return decode[healthOut](t, s.call(t, "health", map[string]any{}))
}

type healthOut struct {
	ActiveActions int `json:"active_actions"`
}

func readAuditLog(t *testing.T, state string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
