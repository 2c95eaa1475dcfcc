package sshexec

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
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
		req := &Request{Command: command, Stdin: make([]byte, stdinLen%4096)}
		script := wrap(req, newRunID(), armedStdin, 5*time.Second, time.Second, false)
		err := checkCommand(req, script)
		wantRefused := strings.IndexByte(command, 0) >= 0 || len(script) > maxScriptBytes
		if (err != nil) != wantRefused {
			t.Fatalf("checkCommand(%q) = %v; want refused %v (script %d bytes)", command, err, wantRefused, len(script))
		}
		if err != nil {
			return
		}
		q := shellQuote(command)
		if !strings.HasPrefix(script, "__agw_cmd="+q+"\n__agw_body=") {
			t.Fatalf("the script does not start with the command quoted as %s:\n%.200s", q, script)
		}
		if got, ok := unquote(q); !ok || got != command {
			t.Fatalf("the quoted command %s unquotes to %q, %v; want %q", q, got, ok, command)
		}
	})
}

// TestPreludeQuoting runs the prelude of hostile directories and values in
// a real sh: every value arrives byte for byte, the directory is entered
// even when it looks like an option, and nothing in them runs.
func TestPreludeQuoting(t *testing.T) {
	canary := filepath.Join(t.TempDir(), "ran")
	hostile := []string{
		"plain", "", "'; touch " + canary + "; '", "$(touch " + canary + ")", "`touch " + canary + "`",
		"a\nb\n", `back\slash`, `"double"`, "tab\there", "ünïcode €", "-n", "$HOME ${PATH} $$", "*", "\\'\\",
	}
	for _, v := range hostile {
		dir := filepath.Join(t.TempDir(), v)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		script := prelude(dir, map[string]string{"V": v, "W": "x" + v}) + `printf '%s\0%s\0' "$V" "$W"; pwd -P`
		out, err := exec.Command("sh", "-c", script).Output()
		if err != nil {
			t.Fatalf("value %q: %v", v, err)
		}
		parts := strings.SplitN(string(out), "\x00", 3)
		real, _ := filepath.EvalSymlinks(dir)
		if len(parts) != 3 || parts[0] != v || parts[1] != "x"+v || strings.TrimSuffix(parts[2], "\n") != real {
			t.Errorf("value %q: got %q; want it back twice and the directory %q", v, out, real)
		}
	}
	if _, err := os.Stat(canary); err == nil {
		t.Fatal("a value ran a command")
	}
	out, err := exec.Command("sh", "-c", prelude("/nonexistent/dir", nil)+"echo ran").CombinedOutput()
	if code := exitCode(err); code != DirExitStatus || strings.Contains(string(out), "ran") || !strings.Contains(string(out), "cannot enter the directory /nonexistent/dir") {
		t.Errorf("a directory that cannot be entered: exit %d, %q; want %d and the command not run", code, out, DirExitStatus)
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

func TestCheckCommandEnv(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		dir  string
		want bool // refused
	}{
		{map[string]string{"OK_1": "v"}, "/tmp", false},
		{map[string]string{"1BAD": "v"}, "", true},
		{map[string]string{"A-B": "v"}, "", true},
		{map[string]string{"X; touch y": "v"}, "", true},
		{map[string]string{"ACTIONGW_RUN": "forged"}, "", true},
		{map[string]string{"V": "a\x00b"}, "", true},
		{nil, "a\x00b", true},
	} {
		req := &Request{Command: "true", Env: tt.env, Dir: tt.dir}
		err := checkCommand(req, wrap(req, newRunID(), armedStdin, 5*time.Second, time.Second, false))
		var ce *CommandError
		if refused := errors.As(err, &ce); refused != tt.want {
			t.Errorf("env %q dir %q: %v; want refused %v", tt.env, tt.dir, err, tt.want)
		}
	}
}
