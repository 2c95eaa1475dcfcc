package policy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/output"
)

// rulesFor is an SSH target's rules for the tests.
func rulesFor(t *testing.T, approve string) *SSH {
	t.Helper()
	cmds, err := CompileCommands("web", []string{`ls( .*)?`}, []string{`rm `})
	if err != nil {
		t.Fatal(err)
	}
	return &SSH{Target: "web", Commands: cmds, Approve: approve, MaxCommand: 64, MaxStdin: 8,
		Cwd: "/srv", Dirs: &Dirs{Target: "web", Allow: []string{"/srv/**"}}, Env: map[string]string{"FROM": "target"}, AllowEnv: []string{"APP_*"},
		SettableEnv: func(name string) bool {
			return !strings.HasPrefix(name, "ACTIONGW_") && !strings.ContainsAny(name, " ;")
		},
		EnvNameRule: "no ACTIONGW_", Timeout: time.Minute, MaxTimeout: time.Hour, OutputLimit: 100}
}

// refusal names what err is: "" for none, "limit RULE" or "denied RULE".
func refusal(err error) string {
	var de *DeniedError
	var le *LimitError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &le):
		return "limit " + le.Rule
	case errors.As(err, &de):
		return "denied " + de.Rule
	}
	return "other " + err.Error()
}

func TestDecideCommand(t *testing.T) {
	for _, tt := range []struct {
		name    string
		approve string
		c       Command
		verdict Verdict
		// the refusal of the command, and of its sudo, stdin, directory
		// and environment
		err, sudo, stdin, dir, env string
	}{
		{"listed", ApproveNever, Command{Command: "ls -l"}, Allowed, "", "", "", "", ""},
		{"unlisted, never asks", ApproveNever, Command{Command: "id"}, Denied, `denied allow_commands ["ls( .*)?"]`, "", "", "", ""},
		{"unlisted asks", ApproveUnlisted, Command{Command: "id"}, Asked, "", "", "", "", ""},
		{"listed, always asks", ApproveAlways, Command{Command: "ls"}, Asked, "", "", "", "", ""},
		{"deny pattern wins over asking", ApproveAlways, Command{Command: "ls; rm -rf /"}, Denied, `denied deny_commands[0] "rm "`, "", "", "", ""},
		{"empty", ApproveUnlisted, Command{}, Denied, "denied command", "", "", "", ""},
		{"too long, before the rules", ApproveNever, Command{Command: "rm " + strings.Repeat("x", 64)}, Denied, "limit max_command_bytes", "", "", "", ""},
		{"NUL", ApproveNever, Command{Command: "ls \x00"}, Denied, "limit command", "", "", "", ""},
		{"sudo", ApproveNever, Command{Command: "ls", Sudo: true}, Allowed, "", "denied allow_sudo", "", "", ""},
		{"stdin", ApproveNever, Command{Command: "ls", Stdin: 9}, Allowed, "", "", "limit max_stdin_bytes", "", ""},
		{"cwd outside", ApproveNever, Command{Command: "ls", Cwd: "/etc"}, Allowed, "", "", "", `denied allow_cwd ["/srv/**"]`, ""},
		{"cwd with NUL", ApproveNever, Command{Command: "ls", Cwd: "/srv/\x00"}, Allowed, "", "", "", "limit cwd", ""},
		{"cwd too long", ApproveNever, Command{Command: "ls", Cwd: "/srv/" + strings.Repeat("d", MaxCwdBytes)}, Allowed, "", "", "", "limit cwd", ""},
		{"env not allowed", ApproveNever, Command{Command: "ls", Env: map[string]string{"PATH": "/tmp"}}, Allowed, "", "", "", "", "denied allow_env"},
		{"env name not settable, before allow_env", ApproveNever, Command{Command: "ls", Env: map[string]string{"ACTIONGW_RUN": "x"}}, Allowed, "", "", "", "", "limit env"},
		{"env value with NUL", ApproveNever, Command{Command: "ls", Env: map[string]string{"APP_X": "a\x00"}}, Allowed, "", "", "", "", "limit env"},
		{"env value too long", ApproveNever, Command{Command: "ls", Env: map[string]string{"APP_X": strings.Repeat("v", MaxEnvValueBytes+1)}}, Allowed, "", "", "", "", "limit env"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := rulesFor(t, tt.approve).Decide(tt.c)
			if d.Verdict != tt.verdict {
				t.Errorf("verdict %v (%v); want %v", d.Verdict, d.Err, tt.verdict)
			}
			for _, f := range []struct {
				what      string
				err       error
				got, want string
			}{{"command", d.Err, refusal(d.Err), tt.err}, {"sudo", d.SudoErr, refusal(d.SudoErr), tt.sudo}, {"stdin", d.StdinErr, refusal(d.StdinErr), tt.stdin},
				{"cwd", d.DirErr, refusal(d.DirErr), tt.dir}, {"env", d.EnvErr, refusal(d.EnvErr), tt.env}} {
				if f.got != f.want {
					t.Errorf("%s: got %q (%v); want %q", f.what, f.got, f.err, f.want)
				}
			}
			if d.Verdict == Asked && d.Rule != RuleApprove {
				t.Errorf("asked under %q; want %q", d.Rule, RuleApprove)
			}
		})
	}
}

// TestDecideCommandRunsWith: what an allowed command runs with is
// decided with it: the directory cleaned, the target's environment under
// the call's, its sudo, timeout and output limit.
func TestDecideCommandRunsWith(t *testing.T) {
	r := rulesFor(t, ApproveNever)
	r.AllowSudo = true
	r.Env = map[string]string{"FROM": "target", "APP_MODE": "default"}
	d := r.Decide(Command{Command: "ls", Sudo: true, Cwd: "/srv//app/../lib/", Env: map[string]string{"APP_MODE": "x"}, Timeout: 2 * time.Hour})
	if d.Dir != "/srv/lib" || d.Env["APP_MODE"] != "x" || d.Env["FROM"] != "target" || len(d.Env) != 2 || !d.Sudo {
		t.Errorf("runs in %q with %q, sudo %v; want /srv/lib with APP_MODE=x FROM=target, sudo", d.Dir, d.Env, d.Sudo)
	}
	if d.Timeout != time.Hour || !d.Capped || d.AskedTimeout != 2*time.Hour || d.OutputLimit != 100 {
		t.Errorf("timeout %v (capped %v, asked %v), output limit %d; want 1h capped, asked 2h, 100", d.Timeout, d.Capped, d.AskedTimeout, d.OutputLimit)
	}
	if r.Env["APP_MODE"] != "default" {
		t.Errorf("the call's env leaked into the target's: %q", r.Env)
	}
	d = r.Decide(Command{Command: "ls"})
	if d.Dir != "/srv" || d.Env["FROM"] != "target" || d.Timeout != time.Minute || d.Capped {
		t.Errorf("without a cwd, env or timeout: %q, %q, %v; want the target's /srv, FROM=target, 1m", d.Dir, d.Env, d.Timeout)
	}
	many := map[string]string{}
	for i := range MaxEnv {
		many["APP_"+strings.Repeat("N", i+1)] = "v"
	}
	if d = r.Decide(Command{Command: "ls", Env: many}); refusal(d.EnvErr) != "limit env" {
		t.Errorf("%d variables with the target's: %v; want refused (at most %d)", MaxEnv+1, d.EnvErr, MaxEnv)
	}
}

func TestDecideTransfer(t *testing.T) {
	on := &SSH{Target: "web", Paths: &Paths{Target: "web", Allow: []string{"/srv/app/**"}, Deny: []string{"/srv/app/key"}}, MaxUpload: 10, MaxDownload: 20}
	off := &SSH{Target: "web", Paths: &Paths{Target: "web"}}
	for _, tt := range []struct {
		name string
		r    *SSH
		t    Transfer
		want string // the refusal; "" allowed
	}{
		{"allowed", on, Transfer{Path: "/srv/app/a.conf"}, ""},
		{"relative: checked once resolved", on, Transfer{Path: "app/a.conf"}, ""},
		{"outside", on, Transfer{Path: "/etc/passwd"}, `denied allow_paths ["/srv/app/**"]`},
		{"dot-dot cleaned before the check", on, Transfer{Path: "/srv/app/../../etc/passwd"}, `denied allow_paths ["/srv/app/**"]`},
		{"denied", on, Transfer{Path: "/srv/app/key"}, `denied deny_paths[0] "/srv/app/key"`},
		{"transfers off", off, Transfer{Path: "/srv/app/a.conf"}, "denied allow_paths"},
		{"transfers off, relative", off, Transfer{Path: "a.conf"}, "denied allow_paths"},
		{"empty", on, Transfer{}, "limit path"},
		{"NUL", on, Transfer{Path: "/srv/app/a\x00"}, "limit path"},
		{"too long", on, Transfer{Path: "/srv/app/" + strings.Repeat("a", MaxPathBytes)}, "limit path"},
		{"upload within", on, Transfer{Path: "/srv/app/a", Upload: true, Size: 10}, ""},
		{"upload too large, before the path", on, Transfer{Path: "/etc/passwd", Upload: true, Size: 11}, "limit max_upload_bytes"},
	} {
		d := tt.r.DecideTransfer(tt.t)
		if got := refusal(d.Err); got != tt.want || (got == "") != (d.Verdict == Allowed) {
			t.Errorf("%s: %v %q (%v); want %q", tt.name, d.Verdict, got, d.Err, tt.want)
		}
	}
	if d := on.DecideTransfer(Transfer{Path: "/srv/app/a", Upload: true}); d.MaxBytes != 10 {
		t.Errorf("an upload's cap: %d; want max_upload_bytes, 10", d.MaxBytes)
	}
	if d := on.DecideTransfer(Transfer{Path: "/srv/app/a"}); d.MaxBytes != 20 {
		t.Errorf("a download's cap: %d; want max_download_bytes, 20", d.MaxBytes)
	}
}

func TestDecideHTTP(t *testing.T) {
	r := &HTTP{Requests: Requests{Target: "api", Methods: []string{"GET", "POST"}, Paths: []string{"/v1/**"}},
		ApproveMethods: []string{"POST"}, Timeout: time.Minute, MaxTimeout: time.Hour}
	for _, tt := range []struct {
		name, method, path string
		verdict            Verdict
		rule               string // the denial's, or the option asking
	}{
		{"allowed", "GET", "/v1/x", Allowed, ""},
		{"asked", "POST", "/v1/x", Asked, RuleApproveMethods},
		{"method", "DELETE", "/v1/x", Denied, `methods ["GET" "POST"]`},
		{"path", "GET", "/v2/x", Denied, `paths ["/v1/**"]`},
		{"denied, not asked", "POST", "/v2/x", Denied, `paths ["/v1/**"]`},
	} {
		d := r.Decide(tt.method, tt.path, 0)
		rule := d.Rule
		if de := (*DeniedError)(nil); errors.As(d.Err, &de) {
			rule = de.Rule
		}
		if d.Verdict != tt.verdict || rule != tt.rule || d.NoRedirects != (tt.verdict == Asked) || d.Timeout != time.Minute {
			t.Errorf("%s: %v %q, no redirects %v, timeout %v; want %v %q", tt.name, d.Verdict, rule, d.NoRedirects, d.Timeout, tt.verdict, tt.rule)
		}
	}
}

func TestFanout(t *testing.T) {
	deny := func(target string) error {
		return &DeniedError{Target: target, Rule: "allow_commands", Reason: "no"}
	}
	for _, tt := range []struct {
		name     string
		refusals []error
		asks     bool
		verdict  Verdict
		reason   string
	}{
		{"all allowed", []error{nil, nil}, false, Allowed, ""},
		{"one asks", []error{nil, nil}, true, Asked, ""},
		{"a missing secret fails that target alone", []error{nil, &LimitError{Rule: "credentials"}}, false, Allowed, ""},
		{"one denial denies all, even asked", []error{nil, deny("b"), deny("c")}, true, Denied,
			"nothing ran: 2 targets of 3 refuse the command: b, c: no (allow_commands)"},
		{"a denial behind another error", []error{fmt.Errorf("target a: %w", deny("a"))}, false, Denied,
			"nothing ran: 1 target of 1 refuse the command: a: no (allow_commands)"},
	} {
		d := Fanout("group:g", tt.refusals, tt.asks, time.Hour)
		var de *DeniedError
		reason := ""
		if errors.As(d.Err, &de) {
			reason = de.Reason
			if de.Target != "group:g" || de.Rule != "the targets' rules" {
				t.Errorf("%s: denied for %q by %q; want the fan-out's label, the targets' rules", tt.name, de.Target, de.Rule)
			}
		}
		if d.Verdict != tt.verdict || reason != tt.reason || d.Timeout != time.Hour {
			t.Errorf("%s: %v %q (timeout %v); want %v %q", tt.name, d.Verdict, reason, d.Timeout, tt.verdict, tt.reason)
		}
	}
}

// FuzzClipDots: policy's texts cut what they quote as the gateway's do.
func FuzzClipDots(f *testing.F) {
	for _, s := range []string{"", "abc", "héllo wörld", "\xff\xfe\x80\x80\x80", "日本語のテキスト"} {
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > len(s)+8 {
			return
		}
		if got, want := clipDots(s, n), output.Clip(s, n); got != want {
			t.Errorf("clipDots(%q, %d) = %q; want %q", s, n, got, want)
		}
	})
}
