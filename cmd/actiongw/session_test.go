//go:build linux

package main

import (
	"strings"
	"testing"

	"github.com/actiongw/actiongw/gateway"
)

// TestSessionScreenNotHeldByKeyPrefix types, in a session on a target
// whose key is an OpenSSH key, output that begins forms every such key's
// forms begin with ("623", the hex of its body's start; "---", its
// armour's): the screen shows it and what follows at once, where it
// once stalled at [HELD] until some 2 KB more output came.
func TestSessionScreenNotHeldByKeyPrefix(t *testing.T) {
	s := startServedWith(t, servedOptions{tables: sessionTarget})
	shell := decode[gateway.SSHSessionOutput](t, s.call(t, "ssh_session_start", map[string]any{"target": "term", "command": "bash --norc --noprofile"}))
	defer s.call(t, "cancel_action", map[string]any{"handle": shell.Handle})
	out := decode[gateway.SSHSessionOutput](t, s.call(t, "ssh_session_send", map[string]any{"handle": shell.Handle,
		"text": "echo pid 1623 --- 2d2d; echo done-$((6*7))", "keys": []string{"Enter"}, "wait_for": "(?m)^done-42$", "wait_s": 20}))
	if out.Matched == nil || !*out.Matched {
		t.Fatalf("the screen never showed done-42: %q", out.Screen.Rows)
	}
	if screen := strings.Join(out.Screen.Rows, "\n"); !strings.Contains(screen, "\npid 1623 --- 2d2d\n") || strings.Contains(screen, "[HELD]") {
		t.Errorf("the screen holds back the output:\n%s", screen)
	}
}
