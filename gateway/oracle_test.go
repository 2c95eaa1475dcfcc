package gateway

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/testkit/tlstest"
	"github.com/actiongw/actiongw/secrets"
)

// The redactor must not be an oracle: an agent that can have its own
// bytes echoed back (an API that echoes a request body, as many do) must
// not learn, from how the echo comes back, whether the bytes it sent
// begin a secret. Otherwise it extends a guess one character at a time
// and reads the whole credential in a few hundred calls.

const (
	oracleUser     = "svc-monitoring-readonly" // public: in the config
	oraclePassword = "tok-3f9a8b7c6d5e4f"
	oracleAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789-"
)

// newEchoGateway starts a loopback API whose POST answers with the
// request body followed by pad bytes of "z", and a gateway with two
// endpoints on it: basic (Basic auth, user oracleUser) and bearer (a
// token), both with the password oraclePassword. server is added to the
// [server] section.
func newEchoGateway(t *testing.T, server string, pad int) *Gateway {
	t.Helper()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
		w.Write([]byte(strings.Repeat("z", pad)))
	}))
	t.Cleanup(api.Close)
	cfg, err := config.Parse(fmt.Appendf(nil, `
[server]
state_dir = %q
%s
[http.basic]
base_url = %q
methods = ["POST"]
auth = "basic"
user = %q
password_secret = "api-password"
allow_private = true
[http.bearer]
base_url = %q
methods = ["POST"]
auth = "bearer"
token_secret = "api-password"
allow_private = true
drain_cap = 1
`, t.TempDir(), server, api.URL, oracleUser, api.URL))
	if err != nil {
		t.Fatal(err)
	}
	gw := New(context.Background(), Options{Config: cfg, Secrets: secrets.Memory{"api-password": []byte(oraclePassword)}})
	if _, err := gw.Config(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return gw
}

// echo sends body to endpoint and returns the response body as the agent
// sees it.
func echo(t *testing.T, gw *Gateway, endpoint, body string) (string, *HTTPRequestOutput) {
	t.Helper()
	r := gw.HTTPRequest(context.Background(), HTTPRequestInput{Endpoint: endpoint, Method: "POST", Path: "/echo", Body: body}, nil)
	out, ok := r.Structured.(*HTTPRequestOutput)
	if !ok {
		t.Fatalf("http_request: %s", r.Text)
	}
	return out.Body.Head + out.Body.Tail, out
}

// TestBasicUserNameIsNoOracle: the "user:password" that Basic auth sends
// is redacted as a whole, and its start is the user name, which the
// agent knows. The end rule (the start of a secret at the end of the
// output is replaced when it is half the secret) must not count the user
// name: else "user:" and one guessed character, echoed back, is replaced
// exactly when the guess is right.
func TestBasicUserNameIsNoOracle(t *testing.T) {
	gw := newEchoGateway(t, "", 0)
	for _, c := range oracleAlphabet {
		guess := oracleUser + ":" + string(c)
		if got, _ := echo(t, gw, "basic", guess); got != guess {
			t.Errorf("the echo of %q came back as %q: the redactor told a right guess of the password's first character", guess, got)
		}
	}
}

// TestCutIsNoOracle: a body cut at the endpoint's limit (or an action
// cancelled, or timed out) ends with bytes that may begin a secret, which
// are replaced rather than shown. Which bytes are replaced must not tell
// how far they match the secret: the agent puts its guess right before
// the cut (the limit is known: retain_head_bytes + retain_tail_bytes +
// drain_cap), and a right guess and a wrong one must come back the same.
func TestCutIsNoOracle(t *testing.T) {
	const limit = 2049 // retain_head_bytes + retain_tail_bytes + drain_cap
	gw := newEchoGateway(t, "retain_head_bytes = 1024\nretain_tail_bytes = 1024\n", 100)
	cut := func(guess string) (string, int64) {
		got, out := echo(t, gw, "bearer", strings.Repeat(".", limit-len(guess))+guess)
		if out.Status != StatusBodyLimit {
			t.Fatalf("status %s; want %s", out.Status, StatusBodyLimit)
		}
		return got, out.Body.Bytes
	}
	// The first 3 characters are what the hold may depend on; past them,
	// one guess at a time must tell nothing.
	for k := 3; k < len(oraclePassword)-1; k++ {
		right, rightBytes := cut(oraclePassword[:k+1])
		wrong, wrongBytes := cut(oraclePassword[:k] + "!")
		if right != wrong || rightBytes != wrongBytes {
			t.Fatalf("%d known characters and a guess: the body came back as ...%q (%d bytes) for the right guess, ...%q (%d bytes) for a wrong one",
				k, right[len(right)-40:], rightBytes, wrong[len(wrong)-40:], wrongBytes)
		}
	}
}

// mtlsEcho serves, over TLS with a client certificate required, an API
// that echoes a request's body and then trailer; it returns a gateway
// whose endpoint "mtls" reaches it with the client key from its keyring
// (server and endpoint are more lines of [server] and [http.mtls]), and
// that key.
func mtlsEcho(t *testing.T, trailer, server, endpoint string) (*Gateway, []byte) {
	t.Helper()
	ca := tlstest.NewCA(t, "test CA")
	certPEM, keyPEM := ca.Client(t, "agent")
	srv := ca.Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(w, r.Body)
		io.WriteString(w, trailer)
	}), tlstest.ServerOptions{ClientAuth: tls.RequireAndVerifyClientCert})
	dir := t.TempDir()
	caFile, certFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem")
	for path, data := range map[string][]byte{caFile: ca.PEM(), certFile: certPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Parse(fmt.Appendf(nil, `
[server]
state_dir = %q
%s
[http.mtls]
base_url = %q
methods = ["POST"]
allow_private = true
ca_file = %q
client_cert = %q
client_key_secret = "client-key"
%s
`, t.TempDir(), server, srv.URL, caFile, certFile, endpoint))
	if err != nil {
		t.Fatal(err)
	}
	gw := New(context.Background(), Options{Config: cfg, Secrets: secrets.Memory{"client-key": keyPEM}})
	t.Cleanup(func() { gw.Close() })
	return gw, keyPEM
}

// TestPEMKeyLineIsNoOracle: a private key is redacted whole, and its
// lines begin with bytes every such key has: a P-256 key in PKCS #8
// (what openssl and Go write for an mTLS client key) has 48 of the 64
// characters of its first line in common with every other. Neither those
// and one guessed character, nor a whole line, may come back otherwise
// than they were sent: a redactor that replaced them told a right guess,
// and gave away 12 bytes of the private key a line at a time.
func TestPEMKeyLineIsNoOracle(t *testing.T) {
	gw, keyPEM := mtlsEcho(t, "", "", "")

	line := strings.Split(string(keyPEM), "\n")[1]
	const common = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg" // PKCS #8, P-256
	if !strings.HasPrefix(line, common) {
		t.Fatalf("the key's first line %q does not begin as a PKCS #8 P-256 key does", line)
	}
	const base64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for _, c := range base64 {
		guess := "key: " + common + string(c)
		if got, _ := echo(t, gw, "mtls", guess); got != guess {
			t.Errorf("the echo of %q came back as %q: the redactor told the first private character of the key's line", guess, got)
		}
	}
	if got, _ := echo(t, gw, "mtls", "key: "+line); got != "key: "+line {
		t.Errorf("the echo of the key's first line came back as %q; want it as it was sent", got)
	}
	if got, _ := echo(t, gw, "mtls", "key: "+string(keyPEM)); got != "key: [REDACTED:client-key]" {
		t.Errorf("the echo of the whole key came back as %q; want it redacted", got)
	}
}

// TestKeyBase64IsNoOracle: a key is also redacted as its base64, and as
// the lines of that base64 wrapped at 64 and 76 columns. The first of
// those lines encodes only the armour and bytes every key of its kind
// has (a PKCS #8 P-256 key's 48 common characters), so an agent knows
// it, a whole pattern, without the key. Whether the bytes after it go on
// with the base64 of the key must not tell in a body cut at the
// endpoint's limit: else one guessed character at a time gives the key.
func TestKeyBase64IsNoOracle(t *testing.T) {
	const limit = 2049 // retain_head_bytes + retain_tail_bytes + drain_cap
	gw, keyPEM := mtlsEcho(t, strings.Repeat("z", 100), "retain_head_bytes = 1024\nretain_tail_bytes = 1024\n", "drain_cap = 1\n")

	const public = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg" // PKCS #8, P-256
	if !strings.HasPrefix(string(keyPEM), public) {
		t.Fatalf("the key %q does not begin as a PKCS #8 P-256 key does", keyPEM[:len(public)])
	}
	// The base64 characters the public bytes alone decide; the next one
	// holds the first private bits.
	known := base64.StdEncoding.EncodeToString(keyPEM)[:8*len(public)/6]
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	var first string
	for i, c := range alphabet {
		got, out := echo(t, gw, "mtls", strings.Repeat(".", limit-len(known)-1)+known+string(c))
		if out.Status != StatusBodyLimit {
			t.Fatalf("status %s; want %s", out.Status, StatusBodyLimit)
		}
		if i == 0 {
			first = got
		} else if got != first {
			t.Fatalf("the cut echo of the key's known base64 and %q came back as ...%q, and with %q as ...%q: the redactor told one of them goes on with the key",
				c, got[len(got)-60:], alphabet[0], first[len(first)-60:])
		}
	}
}

// TestGuessAtTheEndIsNoOracle plays the probe that recovered a bearer
// token which never touched any host: the token's shape is public (a
// prefix, then hex), so the agent prints the known part and one guessed
// character at the very end of a command's output, and keeps the guess
// that comes back replaced. An output's end that begins a secret must
// come back as it was printed, right guess or wrong; only the whole token
// is replaced, and that is put on record as a secret the target was
// never sent.
func TestGuessAtTheEndIsNoOracle(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	run := func(command string) *SSHExecOutput {
		t.Helper()
		r := f.gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: command}, nil)
		out, ok := r.Structured.(*SSHExecOutput)
		if !ok {
			t.Fatalf("ssh_exec %q: %s", command, r.Text)
		}
		return out
	}
	const known = "tok-" // the token's public shape: "tok-" and hex
	for k := len(known); k < len(apiToken); k++ {
		for _, c := range "0123456789abcdef" {
			guess := apiToken[:k] + string(c)
			if guess == apiToken {
				continue
			}
			// At the end of stdout, and at the end of stderr.
			out := run(fmt.Sprintf("printf '%%s' %s; printf '%%s' %s >&2", guess, guess))
			if out.Stdout.Head != guess || out.Stderr.Head != guess {
				t.Fatalf("the guess %q came back as %q on stdout and %q on stderr; want it as printed", guess, out.Stdout.Head, out.Stderr.Head)
			}
		}
	}
	out := run("printf '%s' " + apiToken)
	if out.Stdout.Head != "[REDACTED:api-token]" {
		t.Fatalf("the whole token came back as %q; want it redacted", out.Stdout.Head)
	}
	records := auditRecords(t, f)
	last := records[len(records)-1]
	if last.Handle != out.Handle || !slices.Equal(last.SecretsSeen, []string{"api-token"}) {
		t.Errorf("the outcome of %s names secrets_seen %q; want [api-token], a secret box was never sent", last.Handle, last.SecretsSeen)
	}
	// A guess that is wrong is no secret seen; an endpoint's own token in
	// its answer is none either: it was sent there.
	for _, r := range records[:len(records)-2] {
		if len(r.SecretsSeen) > 0 {
			t.Errorf("outcome %s names secrets_seen %q; want none", r.Handle, r.SecretsSeen)
		}
	}
	f.gw.HTTPRequest(ctx, HTTPRequestInput{Endpoint: "api", Method: "GET", Path: "/x"}, nil)
	if records = auditRecords(t, f); len(records[len(records)-1].SecretsSeen) > 0 {
		t.Errorf("the endpoint's echo of its own token was put on record as a secret seen: %q", records[len(records)-1].SecretsSeen)
	}
}

// auditRecords reads the fixture's audit log, after verifying it.
func auditRecords(t *testing.T, f *fixture) []audit.Record {
	t.Helper()
	var records []audit.Record
	for line := range strings.Lines(readAudit(t, f)) {
		var r audit.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		records = append(records, r)
	}
	return records
}
