//go:build linux

package main

import (
	"os/exec"
	"strings"
	"testing"
	"unicode"
)

// TestHostileAuditTailTarget: the target of an ssh_exec_many record is the
// agent's globs, and a glob may hold any character as long as it matches
// a target ("[\x1b[2Jb]ox" matches box). audit tail printed it as it was,
// so an agent could clear the person's terminal, rewrite the line, or
// reverse it with a right-to-left override, to hide what it ran. Every
// line audit tail prints is plain text: no control, no format character.
func TestHostileAuditTailTarget(t *testing.T) {
	s := startServedWith(t, servedOptions{})
	for _, glob := range []string{"[\x1b[2J\x1b[1Ab]ox", "[\u202eb]ox", "[\r\x07b]ox"} {
		if r := s.call(t, "ssh_exec_many", map[string]any{"targets": []string{glob}, "command": "true"}); r.IsError {
			t.Fatalf("ssh_exec_many on %q: %s", glob, resultText(r))
		}
	}
	cmd := exec.Command(actiongwBinary(t), "audit", "tail", "-n", "50", "-config", s.cfgPath)
	cmd.Env = s.env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("audit tail: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		if !strings.Contains(line, "ssh_exec_many") {
			continue
		}
		for _, r := range line {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
				t.Errorf("audit tail printed %U in %q; want every character printable", r, line)
			}
		}
	}
	if !strings.Contains(string(out), "ssh_exec_many") {
		t.Errorf("audit tail shows no ssh_exec_many record:\n%s", out)
	}
}
