//go:build linux

package main

import (
	"strings"
	"testing"

	"github.com/actiongw/actiongw/gateway"
)

// TestServeCwdEnv: cwd and env reach the command on the real sshd as
// given, and a variable the target does not allow is denied.
func TestServeCwdEnv(t *testing.T) {
	s := startServedWith(t, servedOptions{tables: `
[ssh.envbox]
host = "127.0.0.1"
port = @PORT@
user = "@USER@"
key_secret = "box-key"
known_hosts = "@KNOWN_HOSTS@"
env = { APP_FROM = "config" }
allow_env = ["APP_*"]
`})
	value := `it's "$(id)" ` + "`id`\n;"
	r := s.call(t, "ssh_exec", map[string]any{"target": "envbox", "command": `pwd; printf '%s|%s' "$APP_FROM" "$APP_V"`,
		"cwd": "/tmp", "env": map[string]string{"APP_V": value}})
	if out := decode[gateway.SSHExecOutput](t, r); out.Stdout.Head != "/tmp\nconfig|"+value {
		t.Errorf("cwd and env on the real sshd: %s", resultText(r))
	}
	r = s.call(t, "ssh_exec", map[string]any{"target": "envbox", "command": "true", "env": map[string]string{"LD_PRELOAD": "/tmp/x.so"}})
	if text := resultText(r); !r.IsError || !strings.Contains(text, "allow_env") {
		t.Errorf("LD_PRELOAD: %s; want denied by allow_env", text)
	}
}
