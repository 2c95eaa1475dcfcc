//go:build linux

package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
)

// TestHostileAuditTailWhatRan: an agent runs an allowed, harmless-looking
// command as root, with a variable that changes what it does, in a
// directory of its choosing. audit tail, the person's readable view of
// the log, showed only the command: `command="id -u"`, as if it ran as
// the login user, plainly. Every part of the intent that decides what ran
// is on its line, quoted.
func TestHostileAuditTailWhatRan(t *testing.T) {
	user, password := sshtest.EnableSudo(t)
	s := startServedWith(t, servedOptions{tables: sudoTarget("root", user, "sudo-pw-tail", `allow_env = ["LD_PRELOAD"]`)})
	s.setSecret(t, "sudo-pw-tail", password)
	until(t, s.client, "the sudo secret to load", "ssh_exec",
		map[string]any{"target": "root", "command": "id -u", "sudo": true, "cwd": "/tmp", "env": map[string]string{"LD_PRELOAD": "/tmp/x.so\nfake"}},
		func(r *mcp.CallToolResult) bool { return !strings.Contains(resultText(r), "not in the keyring") })

	cmd := exec.Command(actiongwBinary(t), "audit", "tail", "-n", "50", "-config", s.cfgPath)
	cmd.Env = s.env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("audit tail: %v\n%s", err, out)
	}
	var intent string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "intent") && strings.Contains(line, "decision=\"allow\"") && strings.Contains(line, " root ") {
			intent = line
		}
	}
	for _, want := range []string{`command="id -u"`, " sudo=true", `cwd="/tmp"`, `env="LD_PRELOAD=/tmp/x.so\nfake\n"`} {
		if !strings.Contains(intent, want) {
			t.Errorf("audit tail's intent line lacks %s: %q", want, intent)
		}
	}
}
