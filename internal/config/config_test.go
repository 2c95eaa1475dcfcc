package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/tlstest"
	"github.com/actiongw/actiongw/policy"
	"github.com/actiongw/actiongw/secrets"
)

func TestExampleConfigLoads(t *testing.T) {
	cfg, err := Load(filepath.Join("..", "..", "config.example.toml"))
	if err != nil {
		t.Fatalf("Load(config.example.toml): %v", err)
	}
	def := Default()
	def.SetDefaults()
	if cfg.Server != def.Server {
		t.Errorf("example [server] = %+v; want the defaults %+v", cfg.Server, def.Server)
	}
	if cfg.Audit != def.Audit {
		t.Errorf("example [audit] = %+v; want the defaults %+v", cfg.Audit, def.Audit)
	}
	web1 := cfg.SSH["web1"]
	if web1 == nil || web1.Port != 22 || web1.KeySecret != "web1-deploy-key" || web1.Timeout != time.Minute {
		t.Errorf("ssh.web1 = %+v; want port 22, key_secret web1-deploy-key, timeout 1m", web1)
	}
	gh := cfg.HTTP["github"]
	if gh == nil || gh.Auth != "bearer" || gh.MaxAttempts != 3 {
		t.Errorf("http.github = %+v; want auth bearer, max_attempts 3", gh)
	}
	if got, want := strings.Join(cfg.SecretNames(), ","), "github-token,web1-deploy-key"; got != want {
		t.Errorf("SecretNames() = %s; want %s", got, want)
	}
}

func TestExampleConfigShowsEveryOption(t *testing.T) {
	// Every field of the config structs appears in config.example.toml.
	data := readFile(t, filepath.Join("..", "..", "config.example.toml"))
	for _, key := range tomlKeys(Server{}, Audit{}, SSHTarget{}, HTTPEndpoint{}) {
		if !strings.Contains(data, "\n"+key+" =") && !strings.Contains(data, "# "+key+" =") {
			t.Errorf("config.example.toml does not document %q", key)
		}
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		toml string
		want []string // substrings of the error
	}{
		{"unknown key names key and line",
			"[server]\nmax_frame_bytes = 2048\nmax_frame_byte = 1\n",
			[]string{"line 3", "server.max_frame_byte", "unknown key"}},
		{"unknown key in a target",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nagent = true\nprot = 2\n",
			[]string{"line 5", "ssh.a.prot"}},
		{"inline password",
			"[http.api]\nbase_url = \"https://x\"\nauth = \"basic\"\nuser = \"u\"\npassword = \"hunter22\"\n",
			[]string{"line 5", "credentials do not belong", "password_secret"}},
		{"PEM block in a secret field",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nkey_secret = \"\"\"-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\"\"\"\n",
			[]string{"ssh.a.key_secret", "looks like a credential"}},
		{"syntax error has a line",
			"[server]\nmax_frame_bytes = = 1\n",
			[]string{"line 2"}},
		{"result over frame",
			"[server]\nmax_frame_bytes = 8192\nresult_bytes = 16384\n",
			[]string{"server.result_bytes", "must not exceed max_frame_bytes"}},
		{"tiny frame",
			"[server]\nmax_frame_bytes = 10\n",
			[]string{"server.max_frame_bytes", "at least 1024"}},
		{"ssh without auth",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\n",
			[]string{"ssh.a", "exactly one of key_secret"}},
		{"bad host key pin",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nagent = true\nhost_key = \"MD5:aa\"\n",
			[]string{"ssh.a.host_key"}},
		{"jump to nowhere",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nagent = true\njump = \"b\"\n",
			[]string{"ssh.a.jump", "names no [ssh.b]"}},
		{"jump loop",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nagent = true\njump = \"b\"\n[ssh.b]\nhost = \"h\"\nuser = \"u\"\nagent = true\njump = \"a\"\n",
			[]string{"loop"}},
		{"bad regexp",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nagent = true\nallow_commands = [\"(\"]\n",
			[]string{"ssh.a.allow_commands[0]"}},
		{"allow_cwd not a glob of absolute paths",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nagent = true\ncwd = \"/srv/app\"\nallow_cwd = [\"/srv/**\", \"srv/app\"]\n",
			[]string{"line 6: ssh.a.allow_cwd", `allow_cwd[1] "srv/app": it is not an absolute path`}},
		{"allow_cwd with a wildcard inside a segment",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nagent = true\ncwd = \"/srv/app\"\nallow_cwd = [\"/srv/app-*\"]\n",
			[]string{"line 6: ssh.a.allow_cwd", "wildcards match whole segments only"}},
		{"allow_cwd without cwd",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nagent = true\nallow_cwd = [\"/srv/app/**\"]\n",
			[]string{"line 5: ssh.a.allow_cwd", "needs cwd", "login directory"}},
		{"cwd outside allow_cwd",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nagent = true\ncwd = \"/home/u\"\nallow_cwd = [\"/srv/app/**\"]\n",
			[]string{"line 5: ssh.a.cwd", "must be a directory allow_cwd allows", `"/home/u" matches no allowed directory`}},
		{"relative cwd with allow_cwd",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nagent = true\ncwd = \"app\"\nallow_cwd = [\"/srv/app/**\"]\n",
			[]string{"line 5: ssh.a.cwd", `"app" is not an absolute path`}},
		{"base url with userinfo",
			"[http.api]\nbase_url = \"https://u:p@x\"\n",
			[]string{"http.api.base_url", "userinfo"}},
		{"base url without scheme",
			"[http.api]\nbase_url = \"x.example\"\n",
			[]string{"http.api.base_url"}},
		{"bearer without token",
			"[http.api]\nbase_url = \"https://x\"\nauth = \"bearer\"\n",
			[]string{"http.api.token_secret", "required"}},
		{"secret name with a space",
			"[http.api]\nbase_url = \"https://x\"\nauth = \"bearer\"\ntoken_secret = \"my token\"\n",
			[]string{"http.api.token_secret", "bad secret name"}},
		{"client credentials without a client secret",
			"[http.api]\nbase_url = \"https://x\"\nauth = \"oauth2_client_credentials\"\ntoken_url = \"https://x/token\"\nclient_id = \"c\"\n",
			[]string{"http.api.client_secret_secret", "required"}},
		{"token url over plain http",
			"[http.api]\nbase_url = \"https://x\"\nauth = \"oauth2_client_credentials\"\ntoken_url = \"http://auth.example/token\"\nclient_id = \"c\"\nclient_secret_secret = \"cs\"\n",
			[]string{"http.api.token_url", "https://"}},
		{"token url on loopback over http without allow_private",
			"[http.api]\nbase_url = \"https://x\"\nauth = \"oauth2_client_credentials\"\ntoken_url = \"http://127.0.0.1:9/token\"\nclient_id = \"c\"\nclient_secret_secret = \"cs\"\n",
			[]string{"http.api.token_url", "allow_private"}},
		{"scopes on a refresh token endpoint",
			"[http.api]\nbase_url = \"https://x\"\nauth = \"oauth2_refresh_token\"\ntoken_url = \"https://x/token\"\nclient_id = \"c\"\nrefresh_token_secret = \"rt\"\nscopes = [\"a\"]\n",
			[]string{"http.api.scopes", "not used"}},
		{"refresh token without its secret",
			"[http.api]\nbase_url = \"https://x\"\nauth = \"oauth2_refresh_token\"\ntoken_url = \"https://x/token\"\nclient_id = \"c\"\n",
			[]string{"http.api.refresh_token_secret", "required"}},
		{"client id with bearer",
			"[http.api]\nbase_url = \"https://x\"\nauth = \"bearer\"\ntoken_secret = \"t\"\nclient_id = \"c\"\n",
			[]string{"http.api.client_id", "not used"}},
		{"duplicate target name",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nagent = true\n[http.a]\nbase_url = \"https://x\"\n",
			[]string{"ssh.a", "also used"}},
		{"bad duration",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nagent = true\ntimeout = \"soon\"\n",
			[]string{"line 5", "ssh.a.timeout", `invalid duration "soon"`, "needs a unit", `"60s"`}},
		{"duration without a unit",
			"[ssh.box]\nhost = \"h\"\nuser = \"u\"\nagent = true\ntimeout = \"60\"\n",
			[]string{"line 5", "ssh.box.timeout", `invalid duration "60"`, "needs a unit", `e.g. "60s"`}},
		{"duration as a bare number",
			"[ssh.box]\nhost = \"h\"\nuser = \"u\"\nagent = true\ntimeout = 90\n",
			[]string{"line 5", "ssh.box.timeout", "needs a unit", `e.g. "90s"`, "in quotes"}},
		{"server duration as a bare number",
			"[server]\nqueue_wait = 10\n",
			[]string{"line 2", "server.queue_wait", `"10s"`}},
		{"http duration as a bare number",
			"[http.api]\nbase_url = \"https://x\"\nmax_timeout = 300\n",
			[]string{"line 3", "http.api.max_timeout", `"300s"`}},
		{"string for a number",
			"[server]\nmax_frame_bytes = \"big\"\n",
			[]string{"line 2", "server.max_frame_bytes"}},
		{"validation error has the key's line",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nagent = true\n\nport = 70000\n",
			[]string{"line 6: ssh.a.port: must be 1-65535"}},
		{"target-wide problem has the table's line",
			"[server]\n[ssh.a]\nhost = \"h\"\nuser = \"u\"\n",
			[]string{"line 2: ssh.a: set exactly one of"}},
		{"CA target with a key too",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nca_secret = \"ca\"\nkey_secret = \"k\"\n",
			[]string{"ssh.a: set exactly one of key_secret, password_secret, agent = true or ca_secret"}},
		{"CA target with a certificate",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nca_secret = \"ca\"\ncertificate_secret = \"c\"\n",
			[]string{"ssh.a.ca_secret", "the gateway signs the certificate of each action itself"}},
		{"CA certificates valid too long",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nca_secret = \"ca\"\ncert_ttl = \"24h\"\n",
			[]string{"ssh.a.cert_ttl", "must be 10s-1h"}},
		{"CA source address not an address",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nca_secret = \"ca\"\ncert_source_address = \"10.0.0.1, office\"\n",
			[]string{"ssh.a.cert_source_address", `" office" is no IP address or CIDR range`}},
		{"source address without a CA",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nagent = true\ncert_source_address = \"10.0.0.1\"\n",
			[]string{"ssh.a.cert_source_address", "needs ca_secret"}},
		{"relative sftp server",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nca_secret = \"ca\"\nsftp_server = \"sftp-server\"\n",
			[]string{"ssh.a.sftp_server", `"internal-sftp" or the absolute path`}},
		{"jump through a CA target",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nca_secret = \"ca\"\n[ssh.b]\nhost = \"h\"\nuser = \"u\"\nagent = true\njump = \"a\"\n",
			[]string{"ssh.b.jump", "a CA target (ca_secret), whose certificates permit no port forwarding"}},
		{"group naming no target",
			"[ssh.web1]\nhost = \"h\"\nuser = \"u\"\nagent = true\n[group.web]\ntargets = [\"web1\", \"wbe-*\"]\n",
			[]string{"group.web.targets", `"wbe-*" names no SSH target and matches none`}},
		{"empty group",
			"[group.web]\ntargets = []\n",
			[]string{"group.web.targets", "at least one"}},
		{"unknown approve",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nagent = true\napprove = \"sometimes\"\n",
			[]string{"ssh.a.approve", `"never", "unlisted" or "always"`}},
		{"approve unlisted with nothing listed",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nagent = true\napprove = \"unlisted\"\n",
			[]string{"ssh.a.approve", "lists none", `approve = "always"`}},
		{"unknown host key policy",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nagent = true\nhost_key_policy = \"tofu\"\n",
			[]string{"ssh.a.host_key_policy", `"strict" or "ask"`}},
		{"host key policy ask with a pin",
			"[ssh.a]\nhost = \"h\"\nuser = \"u\"\nagent = true\nhost_key_policy = \"ask\"\nhost_key = \"SHA256:x\"\n",
			[]string{"ssh.a.host_key_policy", "pins one key"}},
		{"approve a method the endpoint does not allow",
			"[http.api]\nbase_url = \"https://x\"\napprove_methods = [\"delete\"]\n",
			[]string{"http.api.approve_methods", `"DELETE" is not one of the endpoint's methods`}},
		{"no time to answer",
			"[approval]\ntimeout = \"0s\"\n",
			[]string{"approval.timeout", "more than zero"}},
		{"remember a negative while",
			"[approval]\nremember = \"-1m\"\n",
			[]string{"approval.remember", "negative"}},
		{"syslog over udp",
			"[audit]\nsyslog = \"udp://siem:514\"\n",
			[]string{"line 2: audit.syslog: udp is refused", "no delivery at all", "tcp://host:port"}},
		{"syslog with an unknown scheme",
			"[audit]\nsyslog = \"relp://siem:2514\"\n",
			[]string{"line 2: audit.syslog", `unknown scheme "relp"`}},
		{"syslog without a scheme",
			"[audit]\nsyslog = \"siem:514\"\n",
			[]string{"line 2: audit.syslog", `must be "tcp://host:port" or "tls://host:port"`}},
		{"syslog without a port",
			"[audit]\nsyslog = \"tcp://siem\"\n",
			[]string{"audit.syslog", "needs a port", "6514"}},
		{"syslog with userinfo",
			"[audit]\nsyslog = \"tls://u:hunter22@siem:6514\"\n",
			[]string{"audit.syslog", "only a scheme, a host and a port"}},
		{"syslog CA over plain tcp",
			"[audit]\nsyslog = \"tcp://siem:514\"\nsyslog_ca_file = \"/etc/ca.pem\"\n",
			[]string{"line 3: audit.syslog_ca_file", "only with tls://", "in the clear"}},
		{"syslog server name without syslog",
			"[audit]\nsyslog_server_name = \"siem\"\n",
			[]string{"line 2: audit.syslog_server_name", "which is not set"}},
		{"syslog CA that cannot be read",
			"[audit]\nsyslog = \"tls://siem:6514\"\nsyslog_ca_file = \"/nonexistent/ca.pem\"\n",
			[]string{"line 3: audit.syslog_ca_file", "/nonexistent/ca.pem"}},
		{"tiny syslog queue",
			"[audit]\nsyslog_queue_bytes = 1000\n",
			[]string{"line 2: audit.syslog_queue_bytes", "at least 1 MiB"}},
		{"unknown audit key",
			"[audit]\nsyslog_udp = true\n",
			[]string{"line 2", "audit.syslog_udp", "unknown key"}},
		{"every error ends with where to read",
			"[server]\nmax_frame_bytes = 10\n",
			[]string{"config.example.toml", "actiongw check"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.toml))
			if err == nil {
				t.Fatalf("ParseConfig: got no error; want one containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("ParseConfig error = %q; want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter22") {
				t.Errorf("ParseConfig error = %q; must not repeat the inline credential", err)
			}
		})
	}
}

func TestAllowCwd(t *testing.T) {
	cfg, err := Parse([]byte("[ssh.a]\nhost = \"h\"\nuser = \"u\"\nagent = true\ncwd = \"/srv/app/current/\"\nallow_cwd = [\"/srv/app/**\", \"/home/*/work\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.SSH["a"].AllowCwd, []string{"/srv/app/**", "/home/*/work"}; !reflect.DeepEqual(got, want) {
		t.Errorf("allow_cwd: got %q; want %q", got, want)
	}
}

func TestGuessableSecrets(t *testing.T) {
	cert, _ := tlstest.NewCA(t, "test CA").Client(t, "client")
	certFile := filepath.Join(t.TempDir(), "client.pem")
	if err := os.WriteFile(certFile, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse([]byte(strings.ReplaceAll(`
[ssh.a]
host = "h"
user = "u"
password_secret = "a-pass"
allow_sudo = true
sudo_secret = "shared"
[ssh.b]
host = "h"
user = "u"
key_secret = "b-key"
passphrase_secret = "b-phrase"
certificate_secret = "b-cert"
[http.bearer]
base_url = "https://x"
auth = "bearer"
token_secret = "shared"
[http.basic]
base_url = "https://x"
auth = "basic"
user = "u"
password_secret = "basic-pass"
client_cert = "@CERT@"
client_key_secret = "tls-key"
[http.header]
base_url = "https://x"
auth = "header"
header = "X-Key"
token_secret = "header-token"
[http.query]
base_url = "https://x"
auth = "query"
param = "key"
token_secret = "query-token"
[http.cc]
base_url = "https://x"
auth = "oauth2_client_credentials"
token_url = "https://x/token"
client_id = "c"
client_secret_secret = "cc-secret"
[http.rt]
base_url = "https://x"
auth = "oauth2_refresh_token"
token_url = "https://x/token"
client_id = "c"
client_secret_secret = "rt-client-secret"
refresh_token_secret = "rt-token"
`, "@CERT@", certFile)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"a-pass": {"ssh.a.password_secret"}, "shared": {"http.bearer.token_secret", "ssh.a.sudo_secret"},
		"b-phrase": {"ssh.b.passphrase_secret"}, "basic-pass": {"http.basic.password_secret"},
		"header-token": {"http.header.token_secret"}, "query-token": {"http.query.token_secret"},
		"cc-secret": {"http.cc.client_secret_secret"}, "rt-client-secret": {"http.rt.client_secret_secret"},
		"rt-token": {"http.rt.refresh_token_secret"},
	}
	if got := cfg.GuessableSecrets(); !reflect.DeepEqual(got, want) {
		t.Errorf("GuessableSecrets():\ngot  %v\nwant %v (no key_secret, certificate_secret or client_key_secret)", got, want)
	}
}

func TestValidateFieldError(t *testing.T) {
	cfg := Default()
	cfg.Server.MaxConcurrentActions = 0
	var fe *FieldError
	if err := cfg.Validate(); !errors.As(err, &fe) || fe.Field != "server.max_concurrent_actions" {
		t.Fatalf("Validate() = %v; want a *FieldError for server.max_concurrent_actions", err)
	}
}

func TestDefaultPath(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"ACTIONGW_CONFIG": "/a.toml", "XDG_CONFIG_HOME": "/x", "HOME": "/h"}, "/a.toml"},
		{map[string]string{"XDG_CONFIG_HOME": "/x", "HOME": "/h"}, "/x/actiongw/config.toml"},
		{map[string]string{"HOME": "/h"}, "/h/.config/actiongw/config.toml"},
	}
	for _, tt := range tests {
		if got := DefaultPath(func(k string) string { return tt.env[k] }); got != tt.want {
			t.Errorf("DefaultPath(%v) = %s; want %s", tt.env, got, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(readFile(f, filepath.Join("..", "..", "config.example.toml"))))
	f.Add([]byte("[server]\nmax_frame_bytes = 2048\n"))
	f.Add([]byte("[http.a]\nbase_url = \"http://127.0.0.1:1/x\"\nauth = \"query\"\nparam = \"k\"\ntoken_secret = \"t\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			return
		}
		// An accepted config validates again and references
		// only well-formed secret names.
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted config fails a second Validate: %v", err)
		}
		for _, n := range cfg.SecretNames() {
			if err := secrets.CheckName(n); err != nil || looksInline(n) {
				t.Fatalf("accepted config references secret %q: %v", n, err)
			}
		}
		if cfg.Server.ResultBytes > cfg.Server.MaxFrameBytes {
			t.Fatalf("accepted result_bytes %d > max_frame_bytes %d", cfg.Server.ResultBytes, cfg.Server.MaxFrameBytes)
		}
	})
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// tomlKeys lists the toml tags of the fields of the given structs.
func tomlKeys(structs ...any) []string {
	var keys []string
	for _, s := range structs {
		rt := reflect.TypeOf(s)
		for i := range rt.NumField() {
			if k := rt.Field(i).Tag.Get("toml"); k != "-" { // "-": set in code, not in the file
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// TestDefaultTags checks every default tag: it parses, and an empty target
// gets exactly the defaults config.example.toml shows for it.
func TestDefaultTags(t *testing.T) {
	for _, p := range []any{&Server{}, &Audit{}, &SSHTarget{}, &HTTPEndpoint{}} {
		setDefaults(p) // panics on a tag that does not parse
	}
	example, err := Load(filepath.Join("..", "..", "config.example.toml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse([]byte("[ssh.a]\nhost = \"h\"\nuser = \"u\"\nagent = true\n[http.b]\nbase_url = \"https://x\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	// The example sets these differently from the defaults, to show them.
	shown := map[string]bool{"allow_commands": true, "paths": true, "auth": true, "token_secret": true}
	check := func(name string, got, ex any) {
		gv, ev := reflect.ValueOf(got).Elem(), reflect.ValueOf(ex).Elem()
		for i := range gv.NumField() {
			f := gv.Type().Field(i)
			key := f.Tag.Get("toml")
			if _, ok := f.Tag.Lookup("default"); !ok || shown[key] {
				continue
			}
			if !reflect.DeepEqual(gv.Field(i).Interface(), ev.Field(i).Interface()) {
				t.Errorf("%s.%s: default %v, but config.example.toml shows %v", name, key, gv.Field(i).Interface(), ev.Field(i).Interface())
			}
		}
	}
	check("ssh", cfg.SSH["a"], example.SSH["web1"])
	check("http", cfg.HTTP["b"], example.HTTP["github"])
}

func TestLoadErrorNamesFileAndLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte("[ssh.box]\nhost = \"h\"\nuser = \"u\"\nagent = true\ntimeout = \"60\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	var cerr *Error
	if !errors.As(err, &cerr) || cerr.Path != path || len(cerr.Problems) != 1 {
		t.Fatalf("Load = %v; want an *Error for %s with one problem", err, path)
	}
	if got, want := strings.SplitN(err.Error(), "\n", 2)[0], path+`:5: ssh.box.timeout: invalid duration "60": a duration needs a unit, e.g. "60s"`; !strings.HasPrefix(got, want) {
		t.Errorf("first line %q; want it to start with %q", got, want)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "ssh.box.timeout" || fe.Line != 5 {
		t.Errorf("errors.As FieldError = %+v; want ssh.box.timeout on line 5", fe)
	}
}

func TestAuditSyslog(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	certPEM := tlstest.NewCA(t, "syslog CA").PEM()
	if err := os.WriteFile(filepath.Join(home, "ca.pem"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		toml, addr string
		tls        bool
	}{
		{"syslog = \"tcp://siem.example:514\"", "siem.example:514", false},
		{"syslog = \"tls://[::1]:6514\"\nsyslog_ca_file = \"~/ca.pem\"\nsyslog_server_name = \"siem\"", "[::1]:6514", true},
	}
	for _, tt := range tests {
		cfg, err := Parse([]byte("[audit]\n" + tt.toml + "\n"))
		if err != nil {
			t.Fatalf("%s: %v", tt.toml, err)
		}
		addr, useTLS, err := cfg.Audit.SyslogAddr()
		if addr != tt.addr || useTLS != tt.tls || err != nil {
			t.Errorf("%s: SyslogAddr() = %q, %v, %v; want %q, %v", tt.toml, addr, useTLS, err, tt.addr, tt.tls)
		}
		if tt.tls && cfg.Audit.SyslogCAFile != filepath.Join(home, "ca.pem") {
			t.Errorf("syslog_ca_file %q; want ~/ expanded", cfg.Audit.SyslogCAFile)
		}
	}
}

func TestCAFile(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	ca := tlstest.NewCA(t, "test CA")
	certPEM, keyPEM := ca.PEM(), ca.KeyPEM()
	files := map[string][]byte{"ca.pem": certPEM, "key.pem": keyPEM, "token.txt": []byte("ghp_0123456789abcdefghijklmnop\n")}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(home, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, caFile string
		want         string // "" for success
	}{
		{"home-relative PEM", "~/ca.pem", ""},
		{"absolute PEM", filepath.Join(home, "ca.pem"), ""},
		{"missing", "~/nope.pem", "http.api.ca_file: cannot read " + filepath.Join(home, "nope.pem")},
		{"a private key", "~/key.pem", "http.api.ca_file: " + filepath.Join(home, "key.pem") + " holds a private key"},
		{"not PEM", "~/token.txt", "holds no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte("[http.api]\nbase_url = \"https://x\"\nca_file = \"" + tt.caFile + "\"\n"))
			if tt.want == "" {
				if err != nil || cfg.HTTP["api"].CAFile != filepath.Join(home, "ca.pem") {
					t.Fatalf("Parse = %v; want ca_file %s", err, filepath.Join(home, "ca.pem"))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "line 3") {
				t.Fatalf("Parse = %v; want an error on line 3 containing %q", err, tt.want)
			}
			// The key's and the cert's base64, and the token.
			for _, secret := range []string{string(keyPEM[40:70]), string(certPEM[40:70]), "ghp_0123"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("Parse error %q quotes the file", err)
				}
			}
		})
	}
}

func TestClientCert(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	ca := tlstest.NewCA(t, "test CA")
	certPEM, keyPEM := ca.PEM(), ca.KeyPEM()
	for name, data := range map[string][]byte{"client.pem": certPEM, "key.pem": keyPEM} {
		if err := os.WriteFile(filepath.Join(home, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, base, keys string
		want             string // "" for success
	}{
		{"both", "https://x", "client_cert = \"~/client.pem\"\nclient_key_secret = \"client-key\"\n", ""},
		{"certificate alone", "https://x", "client_cert = \"~/client.pem\"\n", "http.api: client_cert and client_key_secret go together"},
		{"key alone", "https://x", "client_key_secret = \"client-key\"\n", "http.api: client_cert and client_key_secret go together"},
		{"a private key for the certificate", "https://x", "client_cert = \"~/key.pem\"\nclient_key_secret = \"client-key\"\n",
			"line 3: http.api.client_cert: " + filepath.Join(home, "key.pem") + " holds a private key"},
		{"missing file", "https://x", "client_cert = \"~/nope.pem\"\nclient_key_secret = \"client-key\"\n", "http.api.client_cert: cannot read"},
		{"plain http", "http://x", "client_cert = \"~/client.pem\"\nclient_key_secret = \"client-key\"\n", "http.api.client_cert: needs an https:// base_url"},
		{"key inline", "https://x", "client_cert = \"~/client.pem\"\nclient_key_secret = \"-----BEGIN PRIVATE KEY-----\"\n",
			"http.api.client_key_secret: holds what looks like a credential"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte("[http.api]\nbase_url = \"" + tt.base + "\"\n" + tt.keys))
			if tt.want == "" {
				if err != nil || cfg.HTTP["api"].ClientCert != filepath.Join(home, "client.pem") {
					t.Fatalf("Parse = %v; want client_cert %s", err, filepath.Join(home, "client.pem"))
				}
				if got, want := strings.Join(cfg.SecretNames(), ","), "client-key"; got != want {
					t.Errorf("SecretNames() = %s; want %s", got, want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse = %v; want an error containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), string(keyPEM[40:70])) {
				t.Fatalf("Parse error %q quotes the key", err)
			}
		})
	}
}

// TestREADMEConfig parses the README's first configuration and checks that
// its allow_commands allow what its text says and deny the rest.
func TestREADMEConfig(t *testing.T) {
	readme := readFile(t, filepath.Join("..", "..", "README.md"))
	_, rest, ok := strings.Cut(readme, "## A first configuration")
	if !ok {
		t.Fatal(`README.md has no "## A first configuration"`)
	}
	_, rest, _ = strings.Cut(rest, "```toml\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("README.md: no ```toml block under A first configuration")
	}
	cfg, err := Parse([]byte(block))
	if err != nil {
		t.Fatalf("README's config does not load: %v", err)
	}
	if a := cfg.HTTP["admin"]; a == nil || !a.AllowPrivate {
		t.Errorf("README's loopback endpoint admin = %+v; want allow_private", a)
	}
	web1 := cfg.SSH["web1"]
	cmds, err := policy.CompileCommands("web1", web1.AllowCommands, web1.DenyCommands)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		command string
		allowed bool
	}{
		{"tail -n 50 /var/log/app.log", true},
		{"journalctl -u nginx -n 100", true},
		{"journalctl -u nginx -n 100000", true}, // the README's ssh_exec example
		{"systemctl status nginx", true},
		{"tail -n 50 /etc/shadow", false},
		{"tail -n 50 /var/log/appxlog", false},
		{"cat /var/log/app.log", false},
		{"tail -n 50 /var/log/app.log; id", false},
		{"systemctl stop nginx", false},
	} {
		if err := cmds.Check(tc.command); (err == nil) != tc.allowed {
			t.Errorf("README's web1 policy on %q: got %v; want allowed %v", tc.command, err, tc.allowed)
		}
	}
}

func TestTargets(t *testing.T) {
	c := &Config{SSH: map[string]*SSHTarget{"web1": {}, "web2": {}, "web10": {}, "db1": {}, "web-bastion": {JumpOnly: true}}}
	for _, tt := range []struct {
		patterns []string
		want     string // the names, or the error
	}{
		{[]string{"web1"}, "[web1]"},
		{[]string{"web*"}, "[web1 web10 web2]"},
		{[]string{"web?", "db1", "web1"}, "[db1 web1 web2]"},
		{[]string{"web[12]"}, "[web1 web2]"},
		{[]string{"web3"}, `"web3" names no SSH target and matches none`},
		{[]string{"web["}, `"web[" is not a glob`},
		{nil, "[]"},
		// A jump host only is no target of a fleet.
		{[]string{"*"}, "[db1 web1 web10 web2]"},
		{[]string{"web-bastion"}, `"web-bastion" is a jump host only (jump_only)`},
		{[]string{"web-b*"}, `"web-b*" names no SSH target and matches none`},
	} {
		got, err := c.Targets(tt.patterns)
		s := fmt.Sprint(got)
		if err != nil {
			s = err.Error()
		}
		if !strings.Contains(s, tt.want) {
			t.Errorf("Targets(%q) = %s; want %s", tt.patterns, s, tt.want)
		}
	}
}

func TestOAuth2SecretNames(t *testing.T) {
	cfg, err := Parse([]byte(`
[http.cc]
base_url = "https://api.example"
auth = "oauth2_client_credentials"
token_url = "http://127.0.0.1:8080/token"
allow_private = true
client_id = "actiongw"
client_secret_secret = "cc-secret"
scopes = ["read", "write:x"]

[http.rt]
base_url = "https://api.example"
auth = "oauth2_refresh_token"
token_url = "https://auth.example/token"
client_id = "actiongw"
refresh_token_secret = "rt-token"
`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got, want := strings.Join(cfg.SecretNames(), ","), "cc-secret,rt-token"; got != want {
		t.Errorf("SecretNames() = %s; want %s", got, want)
	}
}

func TestProxyConfig(t *testing.T) {
	const bearer = "auth = \"bearer\"\ntoken_secret = \"t\"\n"
	tests := []struct {
		name, base, keys string
		want             string // "" for success, else part of the error
		addr             string // ProxyAddr when it loads
	}{
		{"proxy", "https://x", "proxy = \"http://127.0.0.1:3128\"\n" + bearer, "", "127.0.0.1:3128"},
		{"plain http without a credential", "http://x", "proxy = \"http://proxy.corp:8080\"\n", "", "proxy.corp:8080"},
		{"from the environment", "https://x", "use_env_proxy = true\n" + bearer, "", "env.proxy:3128"},
		{"both", "https://x", "proxy = \"http://127.0.0.1:3128\"\nuse_env_proxy = true\n",
			"line 3: http.api.proxy: set either proxy or use_env_proxy, not both", ""},
		{"a password", "https://x", "proxy = \"http://me:hunter2@127.0.0.1:3128\"\n",
			"line 3: http.api.proxy: must not contain a user name or password", ""},
		{"https proxy", "https://x", "proxy = \"https://127.0.0.1:3128\"\n", "http.api.proxy: must start with http://", ""},
		{"no port", "https://x", "proxy = \"http://proxy.corp\"\n", "http.api.proxy: must name a port", ""},
		{"plain http with a credential", "http://x", "proxy = \"http://127.0.0.1:3128\"\n" + bearer,
			"http.api.proxy: the base_url is plain http://", ""},
		{"plain http token url", "https://x", "proxy = \"http://127.0.0.1:3128\"\nallow_private = true\n" +
			"auth = \"oauth2_client_credentials\"\ntoken_url = \"http://127.0.0.1:9/token\"\nclient_id = \"c\"\nclient_secret_secret = \"cs\"\n",
			"http.api.token_url: is plain http://", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("https_proxy", "")
			t.Setenv("HTTPS_PROXY", "http://env.proxy:3128")
			cfg, err := Parse([]byte("[http.api]\nbase_url = \"" + tt.base + "\"\n" + tt.keys))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Parse = %v; want nil", err)
				}
				if got := cfg.HTTP["api"].ProxyAddr(); got != tt.addr {
					t.Errorf("ProxyAddr() = %q; want %q", got, tt.addr)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse = %v; want an error containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("Parse error %q quotes the proxy password", err)
			}
		})
	}
}
