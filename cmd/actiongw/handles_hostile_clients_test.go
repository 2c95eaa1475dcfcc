//go:build linux

package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
)

// TestHostileHandlesOtherClient: two MCP clients share a state directory,
// and the agent of the second learns the first's handles (from a shared
// log, a pasted transcript). Through its own server it cannot read,
// search, wait for or cancel the first's actions, running or finished,
// and the first's running action goes on untouched.
func TestHostileHandlesOtherClient(t *testing.T) {
	s := startServed(t, "signal")
	release := remotePIDFile(t)
	finished := decode[gateway.SSHExecOutput](t, s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "echo first-client-output"}))
	running := s.startBackground(t, "box", "echo running-marker; while [ ! -e "+release+" ]; do sleep 0.1; done")
	other := s.startServer(t, &syncbuf.Buffer{})
	t.Cleanup(func() { other.Close() })

	for _, h := range []string{finished.Handle, running} {
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"read_output", map[string]any{"handle": h, "stream": "stdout"}},
			{"search_output", map[string]any{"handle": h, "stream": "stdout", "pattern": "."}},
			{"action_status", map[string]any{"handle": h, "wait_s": 0}},
			{"cancel_action", map[string]any{"handle": h}},
		} {
			r := callOn(t, other, c.tool, c.args)
			if text := resultText(r); !r.IsError || strings.Contains(text, "first-client-output") || strings.Contains(text, "running-marker") {
				t.Errorf("the other client's %s of %s: %s; want an unknown handle", c.tool, h, text)
			}
		}
	}
	if st := decode[gateway.SSHExecOutput](t, s.call(t, "action_status", map[string]any{"handle": running, "wait_s": 0})); st.Status != gateway.StatusRunning {
		t.Errorf("the first client's action after the other's cancel_action: %s; want running", st.Status)
	}
	os.WriteFile(release, nil, 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := s.client.CallTool(ctx, "action_status", map[string]any{"handle": running, "wait_s": 30}, nil)
	if err != nil || decode[gateway.SSHExecOutput](t, r).Status != gateway.StatusExited {
		t.Fatalf("the first client's action: %v %s; want exited", err, resultText(r))
	}
	if p := decode[output.Page](t, s.call(t, "read_output", map[string]any{"handle": finished.Handle, "stream": "stdout"})); p.Data != "first-client-output\n" {
		t.Errorf("the first client reads its own handle: %q", p.Data)
	}
}
