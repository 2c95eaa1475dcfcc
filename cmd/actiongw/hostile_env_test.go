//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestHostileWrapperEnv: the remote wrapper keeps its own state in shell
// variables named __agw_*, set before the call's environment. A call on a
// target that lets it set any variable (allow_env = ["*"]) named one of
// them: __agw_f, the FIFO the watcher writes stdin into and removes, made
// it truncate and remove a file of the agent's choosing, outside any
// policy; __agw_a turned the dead-man switch off. Such names are refused
// like ACTIONGW_*, and the file is left as it was.
func TestHostileWrapperEnv(t *testing.T) {
	s := startServedWith(t, servedOptions{tables: `
[ssh.anyenv]
host = "127.0.0.1"
port = @PORT@
user = "@USER@"
key_secret = "box-key"
known_hosts = "@KNOWN_HOSTS@"
allow_env = ["*"]
`})
	dir := s.sshd.UserDir(t)
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The login user's file, which its commands can change.
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if err := os.Chown(victim, int(st.Uid), int(st.Gid)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"__agw_f", "__agw_a", "__agw_w"} {
		r := s.call(t, "ssh_exec", map[string]any{"target": "anyenv", "command": "sleep 1", "stdin": "x",
			"env": map[string]string{name: victim}})
		if text := resultText(r); !r.IsError || !strings.Contains(text, "__agw_") {
			t.Errorf("env %s: %s; want it refused, naming the reserved prefix", name, text)
		}
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "kept\n" {
		t.Errorf("the file named in env: %q, %v; want it as it was", b, err)
	}
	s.promptly(t)
}
