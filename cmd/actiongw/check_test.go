//go:build linux

package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/actiongw/actiongw/internal/testkit/rsyslogtest"
	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/internal/testkit/tlstest"
	"github.com/actiongw/actiongw/secrets"
)

func TestCheck(t *testing.T) {
	testenv.SecretService(t)
	sshd := sshtest.Start(t, sshtest.Options{})
	service := "actiongw-test-" + randomHex(t, 6)
	kr := &secrets.Keyring{Service: service}
	ctx := context.Background()
	if err := kr.Set(ctx, "box-key", sshd.ClientKey); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kr.Delete(ctx, "box-key") })
	// A token stored where a private key belongs.
	if err := kr.Set(ctx, "box-token", []byte("ghp_0123456789abcdefghijklmnopqrstuvwxyz")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kr.Delete(ctx, "box-token") })
	// A known_hosts file that records another key for the host.
	_, other := sshtest.NewKey(t)
	wrongKnown := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(wrongKnown, []byte(sshd.KnownHostsLine(other.PublicKey())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	target := func(name, known, secret string) string {
		return fmt.Sprintf("[ssh.%s]\nhost = \"127.0.0.1\"\nport = %d\nuser = %q\nkey_secret = %q\nknown_hosts = %q\n",
			name, sshd.Port, sshd.User, secret, known)
	}
	noRequest := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("check sent a request: %s %s", r.Method, r.URL)
	})
	srv := httptest.NewServer(noRequest)
	t.Cleanup(srv.Close)
	api := func(name string, allowPrivate bool) string {
		return fmt.Sprintf("[http.%s]\nbase_url = %q\nallow_private = %v\n", name, srv.URL, allowPrivate)
	}
	// An HTTPS API with a certificate from a CA no system trusts, and that CA.
	ca := tlstest.NewCA(t, "test CA")
	tlsSrv := ca.Server(t, noRequest, tlstest.ServerOptions{})
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "id")
	if err := os.WriteFile(keyFile, sshd.ClientKey, 0o600); err != nil {
		t.Fatal(err)
	}
	tlsAPI := fmt.Sprintf("[http.private]\nbase_url = %q\nallow_private = true\n", tlsSrv.URL)
	// A client certificate the CA signed, its key and another key, both in
	// the keyring.
	clientCert, clientKey := ca.Client(t, "client")
	_, otherKey := ca.Client(t, "other")
	certFile := filepath.Join(t.TempDir(), "client.pem")
	if err := os.WriteFile(certFile, clientCert, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string][]byte{"client-key": clientKey, "other-key": otherKey} {
		if err := kr.Set(ctx, name, key); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { kr.Delete(ctx, name) })
	}
	mtlsAPI := func(secret string) string {
		return tlsAPI + fmt.Sprintf("ca_file = %q\nclient_cert = %q\nclient_key_secret = %q\n", caFile, certFile, secret)
	}
	// An OAuth2 token endpoint that knows one client secret, which the
	// keyring holds beside another.
	const clientSecret = "cs-9b2f04d1"
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, secret, _ := r.BasicAuth(); id != "actiongw" || secret != clientSecret || r.FormValue("grant_type") != "client_credentials" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":"invalid_client","error_description":"unknown secret %s"}`, secret)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"at-check-5e1c","token_type":"Bearer","expires_in":60}`)
	}))
	t.Cleanup(tokens.Close)
	for name, v := range map[string]string{"client-secret": clientSecret, "wrong-secret": "cs-wrong-77aa", "refresh": "rt-0c3d"} {
		if err := kr.Set(ctx, name, []byte(v)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { kr.Delete(ctx, name) })
	}
	oauthAPI := func(kind, secretField, secret string) string {
		return api("oauth", true) + fmt.Sprintf("auth = %q\ntoken_url = %q\nclient_id = \"actiongw\"\n%s = %q\n", kind, tokens.URL+"/token", secretField, secret)
	}
	// A real rsyslogd over TLS, for the audit export's row.
	syslog := rsyslogtest.Start(t, rsyslogtest.Options{TLS: true})
	tests := []struct {
		name     string
		config   string
		wantExit int
		want     []string
	}{
		{"all good", target("box", sshd.KnownHosts, "box-key") + api("api", true), 0,
			[]string{"secret box-key", "present in the keyring", "ssh box", "host key verified", "http api", "no request sent"}},
		{"endpoint on loopback without allow_private", api("api", false), 1,
			[]string{"http api", "FAIL", "loopback"}},
		{"changed host key", target("box", wrongKnown, "box-key"), 1,
			[]string{"ssh box", "FAIL", sshd.Fingerprint()}},
		{"unknown host key a person is asked about", target("box", filepath.Join(t.TempDir(), "none"), "box-key") + "host_key_policy = \"ask\"\n", 1,
			[]string{"ssh box", "FAIL", "is unknown", sshd.Fingerprint(), `host_key_policy = "ask"`, "the person at the MCP client"}},
		{"missing secret", target("box", sshd.KnownHosts, "no-such-key"), 1,
			[]string{"secret no-such-key", "FAIL", "actiongw secret set no-such-key"}},
		{"token stored as the key", target("box", sshd.KnownHosts, "box-token"), 1,
			[]string{"ssh box", "FAIL", `keyring item "box-token" (key_secret) is not an OpenSSH or PEM private key`,
				"actiongw secret set box-token < ~/.ssh/id_ed25519"}},
		{"private CA without ca_file", tlsAPI, 1,
			[]string{"http private", "FAIL", "unknown authority", `set ca_file = "PATH" in [http.private]`}},
		{"private CA with ca_file", tlsAPI + fmt.Sprintf("ca_file = %q\n", caFile), 0,
			[]string{"http private", "ok", "no request sent"}},
		{"ca_file that is a key", tlsAPI + fmt.Sprintf("ca_file = %q\n", keyFile), 1,
			[]string{"config.toml:6: http.private.ca_file:", "holds a private key", "actiongw check"}},
		{"client certificate and its key", mtlsAPI("client-key"), 0,
			[]string{"secret client-key", "http private", "ok", "no request sent"}},
		{"client certificate and another key", mtlsAPI("other-key"), 1,
			[]string{"http private", "FAIL", `endpoint "private": client_key_secret:`, certFile, `keyring item "other-key"`, "are not a pair"}},
		{"oauth2 client credentials", oauthAPI("oauth2_client_credentials", "client_secret_secret", "client-secret"), 0,
			[]string{"http oauth", "ok", "an access token fetched from " + tokens.URL + "/token", "no request sent"}},
		{"oauth2 client credentials with a refused secret", oauthAPI("oauth2_client_credentials", "client_secret_secret", "wrong-secret"), 1,
			[]string{"http oauth", "FAIL", "the token endpoint answered HTTP 401 invalid_client"}},
		{"oauth2 refresh token", oauthAPI("oauth2_refresh_token", "refresh_token_secret", "refresh"), 0,
			[]string{"http oauth", "ok", "no access token fetched (a refresh token may be rotated on use)"}},
		{"syslog receiver over TLS", fmt.Sprintf("[audit]\nsyslog = \"tls://%s\"\nsyslog_ca_file = %q\nsyslog_server_name = \"localhost\"\n", syslog.Addr, syslog.CAFile), 0,
			[]string{"audit syslog", "ok", "connected to the syslog receiver " + syslog.Addr + " over TLS", "verified for localhost", "no record sent"}},
		{"syslog receiver with a certificate no root signed", fmt.Sprintf("[audit]\nsyslog = \"tls://%s\"\n", syslog.Addr), 1,
			[]string{"audit syslog", "FAIL", "certificate"}},
		{"syslog receiver not there", fmt.Sprintf("[audit]\nsyslog = \"tcp://%s\"\n", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))), 1,
			[]string{"audit syslog", "FAIL", "refused"}},
		{"duration without a unit", target("box", sshd.KnownHosts, "box-key") + "timeout = \"60\"\n", 1,
			[]string{"config.toml:9: ssh.box.timeout:", `invalid duration "60": a duration needs a unit, e.g. "60s"`,
				"config.example.toml", "actiongw check"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfgPath := filepath.Join(t.TempDir(), "config.toml")
			cfg := fmt.Sprintf("[server]\nstate_dir = %q\n%s", t.TempDir(), tt.config)
			if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(actiongwBinary(t), "check", "-config", cfgPath)
			cmd.Env = append(os.Environ(), "ACTIONGW_KEYRING_SERVICE="+service)
			out, _ := cmd.CombinedOutput()
			if got := cmd.ProcessState.ExitCode(); got != tt.wantExit {
				t.Errorf("exit status %d; want %d\n%s", got, tt.wantExit, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, key := range [][]byte{sshd.ClientKey, clientKey, otherKey} {
				if strings.Contains(string(out), strings.Split(string(key), "\n")[1]) {
					t.Errorf("check printed a private key")
				}
			}
			for _, secret := range []string{clientSecret, "cs-wrong-77aa", "rt-0c3d", "at-check-5e1c"} {
				if strings.Contains(string(out), secret) {
					t.Errorf("check printed the secret %q:\n%s", secret, out)
				}
			}
		})
	}
}

// TestCheckWeakSecrets runs the real check on every kind of guessable
// field with weak values, then strong ones: a weak one is a WARN row that
// names the item and the field, says why and what to do and never shows
// the value; it does not fail check. A private key's item is not judged.
func TestCheckWeakSecrets(t *testing.T) {
	cfgPath, env, kr := guessableEnv(t)
	ctx := t.Context()
	check := func(t *testing.T, cfgPath string, values map[string]string) (map[string]string, string, int) {
		t.Helper()
		cmd := exec.Command(actiongwBinary(t), "check", "-config", cfgPath)
		cmd.Env = env
		b, _ := cmd.CombinedOutput()
		out := string(b)
		for _, v := range values {
			assertNoPart(t, "check", out, v)
		}
		rows := map[string]string{} // "secret NAME" → its row
		for _, line := range strings.Split(out, "\n") {
			if item, _, ok := strings.Cut(line, "  "); ok && strings.HasPrefix(item, "secret ") {
				rows[item] = line
			}
		}
		return rows, out, cmd.ProcessState.ExitCode()
	}
	store := func(name, v string) {
		if err := kr.Set(ctx, name, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}

	weak := map[string]string{"s-key": "Dragon1987"}
	for _, f := range guessableFields {
		weak[f.item] = f.weak
	}
	for name, v := range weak {
		store(name, v)
	}
	rows, out, _ := check(t, cfgPath, weak)
	for _, f := range guessableFields {
		row := rows["secret "+f.item]
		for _, w := range []string{"WARN", "used as " + f.field, "could be found by trying", "come back redacted", "longer random value", "actiongw secret set " + f.item} {
			if !strings.Contains(row, w) {
				t.Errorf("the row of %s lacks %q: %q\n%s", f.item, w, row, out)
			}
		}
	}
	if row := rows["secret s-key"]; strings.Contains(row, "WARN") || row == "" {
		t.Errorf("the row of the key_secret item: %q; want it listed and not judged", row)
	}

	strong := map[string]string{}
	for _, f := range guessableFields {
		strong[f.item] = "tok_" + rand.Text()
		store(f.item, strong[f.item])
	}
	rows, out, _ = check(t, cfgPath, strong)
	for _, f := range guessableFields {
		if row := rows["secret "+f.item]; !strings.Contains(row, " ok ") {
			t.Errorf("the row of %s with a strong value: %q; want ok\n%s", f.item, row, out)
		}
	}

	// A weak secret warns; it does not fail check.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("check sent a request: %s %s", r.Method, r.URL)
	}))
	t.Cleanup(api.Close)
	only := filepath.Join(t.TempDir(), "config.toml")
	cfg := fmt.Sprintf("[server]\nstate_dir = %q\n[http.bearer]\nbase_url = %q\nallow_private = true\nauth = \"bearer\"\ntoken_secret = \"s-bearer\"\n", t.TempDir(), api.URL)
	if err := os.WriteFile(only, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	store("s-bearer", "letmein99")
	rows, out, code := check(t, only, map[string]string{"s-bearer": "letmein99"})
	if code != 0 || !strings.Contains(rows["secret s-bearer"], "WARN") || !strings.Contains(out, "1 warning(s)") {
		t.Errorf("exit status %d, output:\n%s\nwant 0, the WARN row of s-bearer and 1 warning(s)", code, out)
	}
}
