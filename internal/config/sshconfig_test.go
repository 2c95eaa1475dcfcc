package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// sshConfigFiles writes files (name → text) into a temp dir, with "$DIR"
// in each text replaced by the dir, and returns the dir.
func sshConfigFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(text, "$DIR", dir)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// parseWithSSHConfig parses target (the body of [ssh.t]) with
// server.ssh_config naming sshCfg, written into a temp dir.
func parseWithSSHConfig(t *testing.T, sshCfg, target string, more ...string) (*Config, string, error) {
	t.Helper()
	files := map[string]string{"ssh_config": sshCfg}
	for i := 0; i+1 < len(more); i += 2 {
		files[more[i]] = more[i+1]
	}
	dir := sshConfigFiles(t, files)
	path := filepath.Join(dir, "ssh_config")
	cfg, err := Parse([]byte("[server]\nssh_config = \"" + path + "\"\n[ssh.t]\n" + target))
	return cfg, dir, err
}

func TestSSHConfigResolve(t *testing.T) {
	me := localUser()
	const common = `
Host *
  ServerAliveInterval 45
  IdentityFile ~/.ssh/id_default
`
	cases := []struct {
		name, sshCfg, target string
		more                 []string // extra files: name, text, …
		want                 SSHTarget
	}{{
		name:   "alias gives HostName, Port, User, keepalive, HostKeyAlias, ConnectTimeout",
		sshCfg: "Host web1 web1.lan\n  HostName 10.0.0.5\n  Port 2222\n  User deploy\n  HostKeyAlias web1-key\n  ConnectTimeout 7\n" + common,
		target: `host = "web1"` + "\nagent = true\n",
		want: SSHTarget{Host: "10.0.0.5", Port: 2222, User: "deploy", Keepalive: 45 * time.Second,
			HostKeyAlias: "web1-key", ConnectTimeout: 7 * time.Second},
	}, {
		name:   "the target's own values win",
		sshCfg: "Host web1\n  HostName 10.0.0.5\n  Port 2222\n  User deploy\n  ServerAliveInterval 9\n  ProxyJump bastion\n  ProxyCommand nc %h %p\n",
		target: "host = \"web1\"\nport = 22\nuser = \"me\"\nkeepalive = \"15s\"\njump = \"j\"\nagent = true\n[ssh.j]\nhost = \"10.9.9.9\"\nuser = \"u\"\nagent = true\n",
		want:   SSHTarget{Host: "10.0.0.5", Port: 22, User: "me", Keepalive: 15 * time.Second, Jump: "j"},
	}, {
		name:   "no User: the local user, as ssh",
		sshCfg: "Host box\n  HostName box.example.com\n",
		target: "host = \"box\"\nagent = true\n",
		want:   SSHTarget{Host: "box.example.com", Port: 22, User: me, Keepalive: 15 * time.Second},
	}, {
		name:   "not an alias: only Host * matches, nothing applies",
		sshCfg: "Host other\n  HostName 10.1.1.1\n" + common,
		target: "host = \"db.example.com\"\nuser = \"u\"\nagent = true\n",
		want:   SSHTarget{Host: "db.example.com", Port: 22, User: "u", Keepalive: 15 * time.Second},
	}, {
		name:   "Include of a glob, HostName %h, wildcard patterns",
		sshCfg: "Include $DIR/conf.d/*.conf\n",
		more: []string{"conf.d/a.conf", "Host *.corp\n  HostName %h.example.com\n  User corp\n",
			"conf.d/b.conf", "Host app.corp\n  Port 2200\n"},
		target: "host = \"app.corp\"\nagent = true\n",
		want:   SSHTarget{Host: "app.corp.example.com", Port: 2200, User: "corp", Keepalive: 15 * time.Second},
	}, {
		name:   "Include inside a Host entry, chained",
		sshCfg: "Host deep\n  Include $DIR/one\n",
		more:   []string{"one", "Include $DIR/two\n", "two", "HostName 10.2.2.2\nUser two\n"},
		target: "host = \"deep\"\nagent = true\n",
		want:   SSHTarget{Host: "10.2.2.2", Port: 22, User: "two", Keepalive: 15 * time.Second},
	}, {
		name:   "Match host",
		sshCfg: "Match host *.lab\n  User labuser\n  Port 2022\nHost x.lab\n  HostName 192.168.0.9\n",
		target: "host = \"x.lab\"\nagent = true\n",
		want:   SSHTarget{Host: "192.168.0.9", Port: 2022, User: "labuser", Keepalive: 15 * time.Second},
	}, {
		// OpenSSH matches Match host against the HostName; the parser
		// matches the name as given, like Host.
		name:   "Match host sees the alias, not the HostName",
		sshCfg: "Host short\n  HostName long.example.com\nMatch host long.example.com\n  User fromhostname\n",
		target: "host = \"short\"\nagent = true\n",
		want:   SSHTarget{Host: "long.example.com", Port: 22, User: me, Keepalive: 15 * time.Second},
	}, {
		name: "ProxyJump list with user@host:port; the first hop's own ProxyJump first",
		sshCfg: `Host inner
  HostName 10.0.0.9
  ProxyJump admin@hop1:2201,hop2
Host hop1
  HostName 192.0.2.1
  User ignored
  ProxyJump outer
Host hop2
  HostName 192.0.2.2
  Port 2202
  HostKeyAlias hop2-key
  ConnectTimeout 3
Host outer
  HostName 198.51.100.1
  User gate
  ServerAliveInterval 20
`,
		target: "host = \"inner\"\nuser = \"u\"\nkey_secret = \"k-inner\"\n",
		want: SSHTarget{Host: "10.0.0.9", Port: 22, User: "u", Keepalive: 15 * time.Second, ProxyJump: []SSHHop{
			{Spec: "outer", Host: "198.51.100.1", Port: 22, User: "gate", Keepalive: 20 * time.Second},
			{Spec: "admin@hop1:2201", Host: "192.0.2.1", Port: 2201, User: "admin"},
			{Spec: "hop2", Host: "192.0.2.2", Port: 2202, User: me, HostKeyAlias: "hop2-key", ConnectTimeout: 3 * time.Second},
		}},
	}, {
		name:   "ProxyJump of ssh:// and [v6]:port forms",
		sshCfg: "Host v6\n  HostName fd00::1\n  ProxyJump ssh://ops@[2001:db8::1]:2022,[2001:db8::2]\n",
		target: "host = \"v6\"\nuser = \"u\"\nagent = true\n",
		want: SSHTarget{Host: "fd00::1", Port: 22, User: "u", Keepalive: 15 * time.Second, ProxyJump: []SSHHop{
			{Spec: "ssh://ops@[2001:db8::1]:2022", Host: "2001:db8::1", Port: 2022, User: "ops"},
			{Spec: "[2001:db8::2]", Host: "2001:db8::2", Port: 22, User: me},
		}},
	}, {
		name:   "IdentityAgent for agent = true",
		sshCfg: "Host a\n  HostName 10.0.0.1\n  IdentityAgent /run/agent-%u.sock\n",
		target: "host = \"a\"\nuser = \"u\"\nagent = true\n",
		want:   SSHTarget{Host: "10.0.0.1", Port: 22, User: "u", Keepalive: 15 * time.Second, IdentityAgent: "/run/agent-" + me + ".sock"},
	}, {
		name:   "ProxyJump none and IdentityAgent SSH_AUTH_SOCK",
		sshCfg: "Host a\n  HostName 10.0.0.1\n  ProxyJump none\n  IdentityAgent SSH_AUTH_SOCK\nHost *\n  ProxyJump bastion\n",
		target: "host = \"a\"\nuser = \"u\"\nagent = true\n",
		want:   SSHTarget{Host: "10.0.0.1", Port: 22, User: "u", Keepalive: 15 * time.Second},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, _, err := parseWithSSHConfig(t, c.sshCfg, c.target, c.more...)
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.SSH["t"]
			gotPick := SSHTarget{Host: got.Host, Port: got.Port, User: got.User, Keepalive: got.Keepalive, Jump: got.Jump,
				HostKeyAlias: got.HostKeyAlias, ConnectTimeout: got.ConnectTimeout, IdentityAgent: got.IdentityAgent, ProxyJump: got.ProxyJump}
			if !reflect.DeepEqual(gotPick, c.want) {
				t.Errorf("got  %+v;\nwant %+v", gotPick, c.want)
			}
		})
	}
}

func TestSSHConfigErrors(t *testing.T) {
	cases := []struct {
		name, sshCfg, target string
		want                 []string // in the error, besides the target, alias and file
	}{
		{"ProxyCommand", "Host web1\n  HostName 10.0.0.5\n  ProxyCommand nc %h %p\n", `host = "web1"`,
			[]string{"ssh.t.host", "ProxyCommand is not supported: it runs a local command"}},
		{"ProxyCommand of a hop", "Host web1\n  ProxyJump b\nHost b\n  ProxyCommand nc %h %p\n", `host = "web1"`,
			[]string{`ProxyJump hop "b"`, "ProxyCommand is not supported"}},
		{"ProxyJump loop", "Host web1\n  ProxyJump a\nHost a\n  ProxyJump b\nHost b\n  ProxyJump a\n", `host = "web1"`,
			[]string{"ProxyJump loops"}},
		{"ProxyJump bad port", "Host web1\n  ProxyJump a:99999\n", `host = "web1"`,
			[]string{`ProxyJump hop "a:99999": port must be 1-65535`}},
		{"bad Port", "Host web1\n  Port ssh\n", `host = "web1"`, []string{`Port must be 1-65535, got "ssh"`}},
		{"bad ConnectTimeout", "Host web1\n  HostName x\n  ConnectTimeout 5s\n", `host = "web1"`, []string{"ConnectTimeout must be a whole number of seconds"}},
		{"unknown token", "Host web1\n  HostName %n.example.com\n", `host = "web1"`, []string{"HostName uses %n"}},
		{"IdentityAgent none with agent", "Host web1\n  HostName x\n  IdentityAgent none\n", `host = "web1"`, []string{"IdentityAgent none turns off the agent"}},
		{"password with ProxyJump", "Host web1\n  ProxyJump b\n", "host = \"web1\"\npassword_secret = \"pw-web1\"",
			[]string{"target's password"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			target := c.target + "\n"
			if !strings.Contains(target, "_secret") {
				target += "agent = true\n"
			}
			_, dir, err := parseWithSSHConfig(t, c.sshCfg, target)
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("got %v; want a *config.Error", err)
			}
			msg := err.Error()
			want := append([]string{`target "t"`, `Host alias "web1"`, filepath.Join(dir, "ssh_config"), "line 4: ssh.t.host"}, c.want...)
			for _, w := range want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q: want it to contain %q", msg, w)
				}
			}
		})
	}
}

// A target's own jump replaces a ProxyCommand, as it replaces ProxyJump.
func TestSSHConfigJumpReplacesProxyCommand(t *testing.T) {
	cfg, _, err := parseWithSSHConfig(t, "Host web1\n  HostName 10.0.0.5\n  ProxyCommand nc %h %p\n",
		"host = \"web1\"\nuser = \"u\"\nagent = true\njump = \"j\"\n[ssh.j]\nhost = \"10.9.9.9\"\nuser = \"u\"\nagent = true\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.SSH["t"].Host; got != "10.0.0.5" {
		t.Errorf("host: got %q; want 10.0.0.5", got)
	}
}

func TestSSHConfigFile(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // the default ~/.ssh/config does not exist
	target := "[ssh.t]\nhost = \"web1\"\nuser = \"u\"\nagent = true\n"
	if cfg, err := Parse([]byte(target)); err != nil || cfg.SSH["t"].Host != "web1" {
		t.Errorf("no default ssh config: got %v; want web1 unchanged", err)
	}
	missing := filepath.Join(t.TempDir(), "nope")
	_, err := Parse([]byte("[server]\nssh_config = \"" + missing + "\"\n" + target))
	if err == nil || !strings.Contains(err.Error(), "server.ssh_config: "+missing+" does not exist") {
		t.Errorf("explicit missing ssh config: got %v; want server.ssh_config: %s does not exist", err, missing)
	}
	dir := sshConfigFiles(t, map[string]string{".ssh/config": "Host web1\n  HostName 10.7.7.7\n"})
	t.Setenv("HOME", dir)
	if cfg, err := Parse([]byte(target)); err != nil || cfg.SSH["t"].Host != "10.7.7.7" {
		t.Errorf("default ~/.ssh/config: got %v; want host 10.7.7.7", err)
	}
	if cfg, err := Parse([]byte("[server]\nssh_config = \"none\"\n" + target)); err != nil || cfg.SSH["t"].Host != "web1" {
		t.Errorf("ssh_config = none: got %v; want web1 unchanged", err)
	}
}

// shadowText is a line of /etc/shadow, for an Include of a secret file the
// user can read: the tests make their own, since only root reads the real
// one.
const shadowText = "root:$y$j9T$abcdefghijklmnopqrstuv$0123456789abcdefghijklmnopqrstuvwxyzABCDE:19000:0:99999:7:::\n"

// The user's ssh config is not the agent's to shape, but it may Include
// any file the user can read and name commands: parsing it runs nothing,
// and its errors show no text of any file.
func TestSSHConfigHostile(t *testing.T) {
	const canary = "CANARYx9f3"
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := "touch " + marker
	cases := []struct {
		name, sshCfg string
		more         []string
		wantErr      string // "" when it loads
	}{
		{"LocalCommand", "Host web1\n  HostName 10.0.0.1\n  PermitLocalCommand yes\n  LocalCommand " + cmd + "\n", nil, ""},
		{"ProxyCommand", "Host web1\n  ProxyCommand " + cmd + "\n", nil, "ProxyCommand is not supported"},
		{"Match exec", "Match exec \"" + cmd + "\"\n  User x\n", nil, "line 1: Match exec is not supported"},
		{"Include a shadow file", "Include $DIR/shadow /etc/passwd\nHost web1\n  HostName 10.0.0.1\n", []string{"shadow", shadowText}, ""},
		{"Include a file that does not parse", "Include $DIR/secret\n",
			[]string{"secret", "Match " + canary + " " + canary + "\n"}, "an Include names a file that does not parse"},
		{"bad Match criterion quoted", "Match " + canary + " x\n", nil, "line 1: a Match criterion other than host or all"},
		{"Include a directory", "Include $DIR/d\n", []string{"d/x", canary}, "Include: read "},
		{"binary", "\x00\xff" + canary + "\n\x00", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := parseWithSSHConfig(t, c.sshCfg, "host = \"web1\"\nuser = \"u\"\nagent = true\n", c.more...)
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("got %v; want it to load", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("got %v; want an error containing %q", err, c.wantErr)
			}
			if err != nil && (strings.Contains(err.Error(), canary) || strings.Contains(err.Error(), "root:")) {
				t.Errorf("error %q shows a file's text", err)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("parsing the ssh config ran a command")
			}
		})
	}
}

// An Include of a file the user cannot read is an error that names the
// file and the errno, and shows none of its text.
func TestSSHConfigIncludeUnreadable(t *testing.T) {
	const canary = "CANARYu7k2"
	dir := sshConfigFiles(t, map[string]string{
		"ssh_config": "Include $DIR/unreadable\nHost web1\n  HostName 10.0.0.1\n",
		"unreadable": shadowText + "Match " + canary + "\n",
	})
	unreadable := filepath.Join(dir, "unreadable")
	if err := os.Chmod(unreadable, 0); err != nil {
		t.Fatal(err)
	}
	if f, err := os.Open(unreadable); err == nil {
		f.Close()
		t.Skip("skipped: this user reads a file of mode 000, as root does, so there is no unreadable file to Include")
	}
	_, err := Parse([]byte("[server]\nssh_config = \"" + filepath.Join(dir, "ssh_config") + "\"\n[ssh.t]\nhost = \"web1\"\nuser = \"u\"\nagent = true\n"))
	if want := "line 1: Include: open " + unreadable + ": permission denied"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v; want an error containing %q", err, want)
	}
	if err != nil && (strings.Contains(err.Error(), canary) || strings.Contains(err.Error(), "root:")) {
		t.Errorf("error %q shows the file's text", err)
	}
}

// safeParseReason is every form a parse error of the ssh config may take:
// a line and a fixed reason, or the path and errno of an Include.
var safeParseReason = regexp.MustCompile(`^(line \d+: )?(` +
	`the ssh config parser failed on it|an Include names a file that does not parse|` +
	`Include nested more than 5 deep \(an Include loop\?\)|Match exec is not supported \(it would run a command\)|` +
	`a Match criterion other than host or all \(user, localuser, canonical, exec… are not supported\)|` +
	`a Match line without its criterion or pattern|a Host pattern that does not parse|syntax error|` +
	`Include: (open|read) /\S*: [a-z ]+)$`)

// FuzzDecodeSSHConfig: whatever an ssh config holds, decoding it returns
// (the parser's panics are caught), and an error is one of the fixed forms
// of safeParseReason, never the text the parser rejected.
func FuzzDecodeSSHConfig(f *testing.F) {
	for _, s := range []string{
		"Host web1\n  HostName 10.0.0.5\n  ProxyJump a@b:22,c\n", "Match user x\n", "Match exec \"id\"\n",
		"Host\n=\nHost [\n", "Match\n", "Match host\n", "Include /nonexistent/x\n", "Include /etc\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := decodeSSHConfig(data)
		if err != nil && !safeParseReason.MatchString(err.Error()) {
			t.Fatalf("decode %q: error %q is not one of the fixed forms", data, err)
		}
	})
}

func TestSSHConfigHosts(t *testing.T) {
	t.Setenv("HOME", "/home/someone")
	dir := sshConfigFiles(t, map[string]string{
		"ssh_config": `Include $DIR/shadow $DIR/inc/*
Host web1 web1.lan *.corp !bad
  IdentityFile ~/.ssh/id_%r@%h
  IdentityFile %d/.ssh/second
  User deploy
  HostName 10.0.0.1
Host *
  IdentityFile ~/.ssh/id_all
Match host matched
  User x
Host under_score bad:name
`,
		"inc/a":  "Host included\n  IdentityFile /keys/%u-%n\n",
		"shadow": shadowText,
	})
	hosts, skipped, err := SSHConfigHosts(filepath.Join(dir, "ssh_config"), "*")
	if err != nil {
		t.Fatal(err)
	}
	want := []SSHConfigHost{
		{Name: "included", IdentityFiles: []string{"/home/someone/.ssh/id_all"}},
		{Name: "web1", IdentityFiles: []string{"/home/someone/.ssh/id_deploy@10.0.0.1", "/home/someone/.ssh/second", "/home/someone/.ssh/id_all"}},
		{Name: "web1.lan", IdentityFiles: []string{"/home/someone/.ssh/id_deploy@10.0.0.1", "/home/someone/.ssh/second", "/home/someone/.ssh/id_all"}},
		{Name: "under_score", IdentityFiles: []string{"/home/someone/.ssh/id_all"}},
	}
	if !reflect.DeepEqual(hosts, want) {
		t.Errorf("got  %+v;\nwant %+v", hosts, want)
	}
	if got := strings.Join(skipped, "\n"); !strings.Contains(got, "Host bad:name: a target name is") || !strings.Contains(got, "Host included: IdentityFile uses %n") {
		t.Errorf("skipped: got %q; want bad:name and the %%n IdentityFile", got)
	}
	hosts, _, err = SSHConfigHosts(filepath.Join(dir, "ssh_config"), "web1*")
	if err != nil || len(hosts) != 2 {
		t.Errorf("-hosts web1*: got %+v, %v; want web1 and web1.lan", hosts, err)
	}
}

// The default ssh config, not asked for by name, with a line the parser
// cannot take does not keep the config from loading: it is a warning.
func TestDefaultSSHConfigUnreadableIsAWarning(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte("Match user someone\n  Port 2222\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse([]byte("[ssh.web1]\nhost = \"web1.example.com\"\nuser = \"deploy\"\nkey_secret = \"web1-key\"\n"))
	if err != nil {
		t.Fatalf("Parse with an unreadable default ssh config: %v", err)
	}
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], `ssh_config = "none"`) {
		t.Errorf("warnings %q; want one naming ssh_config", cfg.Warnings)
	}
	// Another file named explicitly, with the same line, is an error.
	other := filepath.Join(home, "other_config")
	if err := os.WriteFile(other, []byte("Match user someone\n  Port 2222\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse([]byte("[server]\nssh_config = \"" + other + "\"\n[ssh.web1]\nhost = \"web1.example.com\"\nuser = \"deploy\"\nkey_secret = \"web1-key\"\n")); err == nil {
		t.Error("an unreadable ssh config named in [server] loaded without an error")
	}
}
