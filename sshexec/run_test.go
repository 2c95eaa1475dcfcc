package sshexec

import (
	"testing"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
)

func TestRunExitCodes(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	tg := target(s)
	for _, tc := range []struct {
		name, command          string
		status                 Status
		code                   int
		signal, stdout, stderr string
	}{
		{name: "true", command: "true", status: StatusExited},
		{name: "exit 3", command: "echo out; echo err >&2; exit 3", status: StatusExited, code: 3, stdout: "out\n", stderr: "err\n"},
		{name: "stderr only", command: "echo only-err >&2", status: StatusExited, stderr: "only-err\n"},
		{name: "quotes", command: `printf '%s\n' "it's" 'a "b"'`, status: StatusExited, stdout: "it's\na \"b\"\n"},
		{name: "signaled", command: "kill -USR1 $$", status: StatusSignaled, code: -1, signal: "USR1"},
		{name: "syntax error", command: "if then", status: StatusExited, code: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCmd(t, p, tg, tc.command)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if out.res.Status != tc.status {
				t.Errorf("status: got %q; want %q (reason %q)", out.res.Status, tc.status, out.res.Reason)
			}
			if tc.code >= 0 && (out.res.ExitCode == nil || *out.res.ExitCode != tc.code) {
				t.Errorf("exit code: got %v; want %d", out.res.ExitCode, tc.code)
			}
			if out.res.Signal != tc.signal {
				t.Errorf("signal: got %q; want %q", out.res.Signal, tc.signal)
			}
			if out.stdout != tc.stdout {
				t.Errorf("stdout: got %q; want %q", out.stdout, tc.stdout)
			}
			if tc.stderr != "" && out.stderr != tc.stderr {
				t.Errorf("stderr: got %q; want %q", out.stderr, tc.stderr)
			}
		})
	}
}
