package sshexec

import (
	"strings"
	"testing"
	"time"
)

// unquote undoes shellQuote: a single-quoted word in which each quote
// closes the quoting, is escaped with a backslash and reopens it. It
// reports false for anything else.
func unquote(q string) (string, bool) {
	if len(q) < 2 || q[0] != '\'' || q[len(q)-1] != '\'' {
		return "", false
	}
	parts := strings.Split(q[1:len(q)-1], `'\''`)
	for _, p := range parts {
		if strings.Contains(p, "'") {
			return "", false
		}
	}
	return strings.Join(parts, "'"), true
}

// FuzzCommandCheck: whatever the agent sends as a command, it is refused
// exactly when it holds a NUL byte or its wrapped script would pass sshd's
// packet limit; an accepted one is inside the limit, and the wrapper holds
// it quoted so that the remote shell gets it back byte for byte.
func FuzzCommandCheck(f *testing.F) {
	for _, seed := range []string{"true", "echo 'a' \"b\" $HOME `id`", "a\x00b", strings.Repeat("'", 1000), "@CMD@ @ID@", "\n;\t"} {
		f.Add(seed, 3)
	}
	f.Fuzz(func(t *testing.T, command string, stdinLen int) {
		if stdinLen < 0 {
			stdinLen = -stdinLen
		}
		script := wrap(command, newRunID(), stdinLen, true, 5*time.Second)
		err := checkCommand(command, script)
		wantRefused := strings.IndexByte(command, 0) >= 0 || len(script) > maxScriptBytes
		if (err != nil) != wantRefused {
			t.Fatalf("checkCommand(%q) = %v; want refused %v (script %d bytes)", command, err, wantRefused, len(script))
		}
		if err != nil {
			return
		}
		q := shellQuote(command)
		if n := strings.Count(script, "eval "+q); n != 2 {
			t.Fatalf("the script runs the command %d times as %s; want it quoted in both branches", n, q)
		}
		if got, ok := unquote(q); !ok || got != command {
			t.Fatalf("the quoted command %s unquotes to %q, %v; want %q", q, got, ok, command)
		}
	})
}
