package gateway

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/actiongw/actiongw/internal/audit"
)

func TestSSHExecCwdEnv(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	box := f.cfg.SSH["box"]
	cfg := f.reparse(t, `
[ssh.envbox]
host = "`+box.Host+`"
port = `+strconv.Itoa(box.Port)+`
user = "`+box.User+`"
key_secret = "box-key"
host_key = "`+box.HostKey+`"
cwd = "/"
env = { FROM_TARGET = "target value", APP_MODE = "default" }
allow_env = ["APP_*"]
`)
	if err := f.gw.Reload(ctx, cfg, nil); err != nil {
		t.Fatal(err)
	}
	hostile := `'; echo pwned; ' $(id) ` + "`id`" + ` "\n" \ $HOME`
	tests := []struct {
		name    string
		in      SSHExecInput
		stdout  string
		errText string // a refusal or failure that must say this
	}{
		{"target defaults", SSHExecInput{Command: `pwd; printf '%s|%s\n' "$FROM_TARGET" "$APP_MODE"`}, "/\ntarget value|default\n", ""},
		{"call wins", SSHExecInput{Command: `pwd; printf '%s\n' "$APP_MODE"`, Cwd: "/tmp", Env: map[string]string{"APP_MODE": "call"}}, "/tmp\ncall\n", ""},
		{"hostile value arrives as is", SSHExecInput{Command: `printf '%s' "$APP_X"`, Env: map[string]string{"APP_X": hostile}}, hostile, ""},
		{"hostile directory", SSHExecInput{Command: "pwd", Cwd: "/tmp'; echo pwned; '"}, "", "cannot enter the directory"},
		{"name not allowed", SSHExecInput{Command: "true", Env: map[string]string{"PATH": "/tmp/evil"}}, "", "allow_env"},
		{"loader variable not allowed", SSHExecInput{Command: "true", Env: map[string]string{"LD_PRELOAD": "/tmp/x.so"}}, "", "allow_env"},
		{"forged run id", SSHExecInput{Command: "true", Env: map[string]string{"ACTIONGW_RUN": "x"}}, "", "not a variable name that can be set"},
		{"bad name", SSHExecInput{Command: "true", Env: map[string]string{"APP_A; id": "x"}}, "", "not a variable name"},
		{"NUL in a value", SSHExecInput{Command: "true", Env: map[string]string{"APP_N": "a\x00b"}}, "", "NUL"},
		{"long value", SSHExecInput{Command: "true", Env: map[string]string{"APP_L": strings.Repeat("v", 5000)}}, "", "at most 4096 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Target = "envbox"
			r := f.gw.SSHExec(ctx, tt.in, nil)
			if tt.errText != "" {
				if !r.IsError || !strings.Contains(r.Text, tt.errText) || strings.Contains(r.Text, "pwned\n") {
					t.Errorf("got %q; want an error saying %q", r.Text, tt.errText)
				}
				return
			}
			out, ok := r.Structured.(*SSHExecOutput)
			if !ok || r.IsError || out.Stdout.Head != tt.stdout {
				t.Errorf("got %s; want stdout %q", r.Text, tt.stdout)
			}
		})
	}
	// The audit intent says where and with what the command ran.
	var found bool
	err := audit.Tail(ctx, audit.Path(f.state), 200, false, func(rec *audit.Record, err error) error {
		if err == nil && rec.Kind == audit.KindIntent && rec.Target == "envbox" && rec.Cwd == "/tmp" &&
			strings.Contains(rec.Env, "APP_MODE=call\n") && strings.Contains(rec.Env, "FROM_TARGET=target value\n") {
			found = true
		}
		return nil
	})
	if err != nil || !found {
		t.Errorf("no intent with the call's cwd and env in the audit log (%v)", err)
	}
}
