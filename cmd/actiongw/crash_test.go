//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/mcpserver/mcphost"
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

// auditVerify runs `actiongw audit verify` on s's config and keyring.
func (s *served) auditVerify(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(actiongwBinary(t), "audit", "verify", "-config", s.cfgPath)
	cmd.Env = s.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("audit verify: %v\n%s", err, out)
	}
	return string(out)
}

// TestServeSharedStateDir runs three servers on one state directory, as two
// MCP clients on one laptop do: they append concurrently and the audit log
// stays one verified chain; no server's start removes another's running
// action; each reads its own handles.
func TestServeSharedStateDir(t *testing.T) {
	s := startServed(t, "signal")
	first := s.client
	release := remotePIDFile(t)
	running := s.start(t, "ssh_exec", map[string]any{"target": "box", "command": "echo started; while [ ! -e " + release + " ]; do sleep 0.1; done"})
	testenv.WaitFor(t, 20*time.Second, "the first server's command to run", func() bool { return s.health(t).ActiveActions == 1 })
	clients := []*mcphost.Client{first, s.startServer(t, &syncbuf.Buffer{}), s.startServer(t, &syncbuf.Buffer{})}

	var wg sync.WaitGroup
	for i, c := range clients {
		for j := range 30 {
			wg.Go(func() {
				var r *mcp.CallToolResult
				if j%2 == 0 {
					r = callOn(t, c, "http_request", map[string]any{"endpoint": "api", "method": "GET", "path": fmt.Sprintf("/%d/%d", i, j)})
				} else {
					r = callOn(t, c, "ssh_exec", map[string]any{"target": "box", "command": fmt.Sprintf("echo %d %d", i, j)})
				}
				if r.IsError {
					t.Errorf("server %d call %d: %s", i, j, resultText(r))
					return
				}
				var out struct{ Handle string }
				b, _ := json.Marshal(r.StructuredContent)
				json.Unmarshal(b, &out)
				if p := callOn(t, c, "read_output", map[string]any{"handle": out.Handle, "stream": map[bool]string{true: "body", false: "stdout"}[j%2 == 0]}); p.IsError {
					t.Errorf("server %d reads its own handle: %s", i, resultText(p))
				}
			})
		}
	}
	wg.Wait()
	os.WriteFile(release, nil, 0o644)
	r, err := running.WaitTool(context.Background())
	if err != nil || r.IsError {
		t.Fatalf("the first server's long command: %v %s", err, resultText(r))
	}
	out := decode[gateway.SSHExecOutput](t, r)
	if p := callOn(t, first, "read_output", map[string]any{"handle": out.Handle, "stream": "stdout"}); p.IsError || decode[output.Page](t, p).Data != "started\n" {
		t.Errorf("the action that ran while two more servers started: %s", resultText(p))
	}
	for _, c := range clients {
		c.Close()
	}
	if report := s.auditVerify(t); !strings.Contains(report, "carry valid macs") {
		t.Errorf("audit verify after three servers:\n%s", report)
	}
}

// TestServeRestartAfterKill kills serve with SIGKILL during an action; the
// next start records the orphaned intent as interrupted and says so.
func TestServeRestartAfterKill(t *testing.T) {
	s := startServed(t, "signal")
	pidFile := remotePIDFile(t)
	command := "echo $$ > " + pidFile + "; exec sleep 1000"
	s.start(t, "ssh_exec", map[string]any{"target": "box", "command": command})
	pid := waitPID(t, pidFile)
	if err := syscall.Kill(s.client.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !sshtest.WaitGone(pid, 60*time.Second) {
		t.Errorf("remote command %d outlived its server", pid)
	}
	stderr := &syncbuf.Buffer{}
	next := s.startServer(t, stderr)
	if rec := outcomeOf(t, s.state, command); rec.Status != audit.StatusInterrupted {
		t.Errorf("the killed server's action: outcome %+v; want interrupted", rec)
	}
	if !strings.Contains(stderr.String(), "recorded as interrupted") {
		t.Errorf("the next start does not log the interrupted action:\n%s", stderr)
	}
	next.Close()
	s.auditVerify(t)
}

// TestServeAuditRotation writes more than audit_rotate_bytes: the log
// rotates, the chain goes on across the files, and verify checks them all.
func TestServeAuditRotation(t *testing.T) {
	s := startServedWith(t, servedOptions{server: "audit_rotate_bytes = 1048576\nmax_concurrent_actions = 32"})
	path := filepath.Join("/" + strings.Repeat("x", 900)) // a long path: bigger records
	var wg sync.WaitGroup
	for range 1400 {
		wg.Go(func() { s.call(t, "http_request", map[string]any{"endpoint": "api", "method": "GET", "path": path}) })
	}
	wg.Wait()
	s.client.Close()
	rotated, _ := filepath.Glob(filepath.Join(s.state, "audit.*.jsonl"))
	if len(rotated) == 0 {
		t.Errorf("no rotated audit file after about 2.8 MB of records")
	}
	if report := s.auditVerify(t); !strings.Contains(report, fmt.Sprintf("in %d files", len(rotated)+1)) {
		t.Errorf("audit verify does not cover every file:\n%s", report)
	}
}

// TestServeStateDiskFull fills the state directory's disk: the next action
// runs and is recorded once the oldest finished action is evicted from the
// spool to make room.
func TestServeStateDiskFull(t *testing.T) {
	testenv.Root(t, "it mounts a tmpfs")
	s := startServedWith(t, servedOptions{server: "retain_head_bytes = 2097152", prepare: func(state string) {
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", state).CombinedOutput(); err != nil {
			t.Fatalf("mount tmpfs: %v\n%s", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", "-l", state).Run() })
	}})
	// A finished action keeps 2 MB in the spool; then a file fills the rest.
	big := decode[gateway.SSHExecOutput](t, s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "head -c 2000000 /dev/zero | tr '\\0' x"}))
	filler, err := os.Create(filepath.Join(s.state, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = filler.Write(make([]byte, 64<<10))
	}
	filler.Close()
	r := s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "echo still recorded"})
	if text := resultText(r); r.IsError || strings.Contains(text, "WARNING") {
		t.Errorf("an action on a full state disk: %s; want it run and recorded", text)
	}
	if rec := outcomeOf(t, s.state, "echo still recorded"); rec.Status != "exited" {
		t.Errorf("its outcome: %+v", rec)
	}
	if p := s.call(t, "read_output", map[string]any{"handle": big.Handle, "stream": "stdout"}); !strings.Contains(resultText(p), "evicted") {
		t.Errorf("the oldest action after the disk filled: %s; want it evicted to make room", resultText(p))
	}
	s.client.Close()
	s.auditVerify(t)
}

// TestServeKilledStopsSessions kills serve with SIGKILL while two terminal
// sessions are open: a shell that ignores the hang-up, with a job in the
// background that ignores it too, and a program flooding its screen. The
// hang-up alone would leave the first running; the dead-man switch of
// each session must end them all.
func TestServeKilledStopsSessions(t *testing.T) {
	s := startServedWith(t, servedOptions{tables: sessionTarget})
	shellPID, jobPID, floodPID := remotePIDFile(t), remotePIDFile(t), remotePIDFile(t)
	shell := decode[gateway.SSHSessionOutput](t, s.call(t, "ssh_session_start", map[string]any{"target": "term", "command": "bash --norc --noprofile"}))
	// The pid files, not the screen, tell that the line ran: the screen
	// may hold back (see the gateway's heldMarker) what happens to begin
	// a form of a secret (a pid can), until more output decides it.
	s.call(t, "ssh_session_send", map[string]any{"handle": shell.Handle,
		"text": "trap '' HUP; nohup sleep 1001 >/dev/null 2>&1 & echo $! > " + jobPID + "; echo $$ > " + shellPID,
		"keys": []string{"Enter"}})
	s.call(t, "ssh_session_start", map[string]any{"target": "term", "command": "echo $$ > " + floodPID + "; while :; do echo noise; done"})
	pids := map[string]int{"shell": waitPID(t, shellPID), "background job": waitPID(t, jobPID), "flood": waitPID(t, floodPID)}
	if err := syscall.Kill(s.client.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for name, pid := range pids {
		if !sshtest.WaitGone(pid, 60*time.Second) {
			t.Errorf("the session's %s (%d) still runs on the target after serve was killed", name, pid)
		}
	}
}
