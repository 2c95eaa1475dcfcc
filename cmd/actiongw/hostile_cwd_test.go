//go:build linux

package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/audit"
)

// cwdTables are three targets that allow one command, a relative program,
// and let files be uploaded into USERDIR/uploads: open has no allow_cwd,
// gated lets commands run in USERDIR/app only, and overlap lets them run
// anywhere under USERDIR, the uploads included.
const cwdTables = `
[ssh.open]
host = "127.0.0.1"
port = @PORT@
user = "@USER@"
key_secret = "box-key"
known_hosts = "@KNOWN_HOSTS@"
allow_commands = ["^\\./run\\.sh$"]
allow_paths = ["@USERDIR@/uploads/**"]
[ssh.gated]
host = "127.0.0.1"
port = @PORT@
user = "@USER@"
key_secret = "box-key"
known_hosts = "@KNOWN_HOSTS@"
allow_commands = ["^\\./run\\.sh$", "^pwd$"]
allow_paths = ["@USERDIR@/uploads/**"]
cwd = "@USERDIR@/app"
allow_cwd = ["@USERDIR@/app/**"]
[ssh.overlap]
host = "127.0.0.1"
port = @PORT@
user = "@USER@"
key_secret = "box-key"
known_hosts = "@KNOWN_HOSTS@"
allow_commands = ["^bin/deploy$"]
allow_paths = ["@USERDIR@/uploads/**"]
cwd = "@USERDIR@"
allow_cwd = ["@USERDIR@/**"]
`

// TestHostileCwd: a target that allows only "./run.sh" ran whatever
// run.sh was in the directory the call named, and an agent that may
// upload files wrote its own run.sh where it may write and named that
// directory as cwd. With allow_cwd, every spelling of that directory is
// refused as a policy denial naming allow_cwd, audited as one, and the
// person's run.sh still runs in the directories allowed; check warns about
// the targets where the hole is open. (Before allow_cwd, the gated target
// did not load: no key could close the hole.)
func TestHostileCwd(t *testing.T) {
	s := startServedWith(t, servedOptions{tables: cwdTables})
	dir := s.userDir
	r := s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "cd " + dir + ` &&
mkdir app uploads && printf '#!/bin/sh\necho person\n' > app/run.sh && chmod 755 app/run.sh &&
ln -s ../uploads app/up`})
	if r.IsError {
		t.Fatalf("layout: %s", resultText(r))
	}
	// The agent's program, uploaded where it may write.
	for _, target := range []string{"open", "gated"} {
		r = s.call(t, "ssh_upload", map[string]any{"target": target, "path": dir + "/uploads/run.sh",
			"content": "#!/bin/sh\necho agent ran\n", "mode": "0755", "overwrite": true})
		if r.IsError {
			t.Fatalf("upload on %s: %s", target, resultText(r))
		}
	}
	run := func(target, cwd string) (*gateway.SSHExecOutput, string, bool) {
		args := map[string]any{"target": target, "command": "./run.sh"}
		if cwd != "" {
			args["cwd"] = cwd
		}
		r := s.call(t, "ssh_exec", args)
		out := decode[gateway.SSHExecOutput](t, r)
		return &out, resultText(r), r.IsError
	}

	// The hole, where allow_cwd is not set.
	if out, text, _ := run("open", dir+"/uploads"); out.Stdout.Head != "agent ran\n" {
		t.Fatalf("open target, cwd uploads: %s; want the uploaded program to run (the hole this test is about)", text)
	}

	long := dir + "/app" + strings.Repeat("/x", 2100) // over max_cwd_bytes
	for _, tt := range []struct {
		name, cwd string
		want      string // of the refusal
	}{
		{"the upload directory", dir + "/uploads", "allow_cwd"},
		{"trailing slash", dir + "/uploads/", "allow_cwd"},
		{"double slashes", strings.ReplaceAll(dir, "/", "//") + "//uploads", "allow_cwd"},
		{"dot-dot out of the allowed directory", dir + "/app/../uploads", "allow_cwd"},
		{"dot-dot out of the allowed directory, many", dir + "/app/./x/../../uploads/.", "allow_cwd"},
		{"relative", "uploads", "allow_cwd"},
		{"dot relative", "./uploads", "allow_cwd"},
		{"dash", "-", "allow_cwd"},
		{"tilde", "~", "allow_cwd"},
		{"a proc link", "/proc/self/cwd", "allow_cwd"},
		{"NUL", dir + "/app\x00/../../uploads", "NUL"},
		{"very long", long, "at most 4096 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, text, isErr := run("gated", tt.cwd)
			if !isErr || !strings.Contains(text, tt.want) || strings.Contains(text, "agent ran") {
				t.Errorf("cwd %.80q: %s; want it refused, naming %s", tt.cwd, text, tt.want)
			}
			if tt.want == "allow_cwd" && !strings.Contains(text, `denied by policy of target "gated"`) {
				t.Errorf("cwd %.80q: %s; want a policy denial", tt.cwd, text)
			}
		})
	}

	// The person's program runs where allow_cwd allows, cd getting the
	// clean path.
	for _, cwd := range []string{"", dir + "/app", dir + "/app/", dir + "/app/up/..", dir + "//app/."} {
		if out, text, _ := run("gated", cwd); out.Stdout.Head != "person\n" {
			t.Errorf("gated target, cwd %q: %s; want the person's run.sh", cwd, text)
		}
	}
	r = s.call(t, "ssh_exec", map[string]any{"target": "gated", "command": "pwd", "cwd": dir + "/app/up/../"})
	if out := decode[gateway.SSHExecOutput](t, r); out.Stdout.Head != dir+"/app\n" {
		t.Errorf("pwd in %s/app/up/../: %s; want %s/app", dir, resultText(r), dir)
	}

	// Each refusal is audited as a denial by allow_cwd, with the cwd asked.
	var denied int
	for _, rec := range auditRecords(t, s.state) {
		if rec.Kind == audit.KindIntent && rec.Target == "gated" && rec.Decision == "deny" {
			if !strings.HasPrefix(rec.Rule, "allow_cwd") && rec.Rule != "cwd" {
				t.Errorf("denial of gated: rule %q; want allow_cwd (or cwd for a NUL or a length)", rec.Rule)
			}
			if strings.HasPrefix(rec.Rule, "allow_cwd") {
				denied++
			}
		}
	}
	if denied != 10 {
		t.Errorf("audit: %d denials by allow_cwd; want 10", denied)
	}

	// check names the targets where a call's cwd picks the program.
	cmd := exec.Command(actiongwBinary(t), "check", "-config", s.cfgPath)
	cmd.Env = s.env
	b, _ := cmd.CombinedOutput()
	warns := map[string]string{} // item → its WARN row
	for _, line := range strings.Split(string(b), "\n") {
		if item, rest, ok := strings.Cut(line, "  "); ok && strings.HasPrefix(strings.TrimSpace(rest), "WARN") {
			warns[item] += line
		}
	}
	for item, wants := range map[string][]string{
		"ssh open": {`allow_commands[0] "^\\./run\\.sh$" runs a relative program (./run.sh)`, "no allow_cwd", "set allow_cwd"},
		"ssh overlap": {`allow_commands[0] "^bin/deploy$" runs a relative program (bin/deploy)`,
			`allow_cwd "` + dir + `/**" covers a directory that allow_paths "` + dir + `/uploads/**" lets ssh_upload write into`},
	} {
		for _, want := range wants {
			if !strings.Contains(warns[item], want) {
				t.Errorf("check: the WARN row of %s lacks %q:\n%s", item, want, b)
			}
		}
	}
	if row, ok := warns["ssh gated"]; ok {
		t.Errorf("check warns about gated, whose allow_cwd leaves the uploads out: %s", row)
	}
	s.promptly(t)
}
