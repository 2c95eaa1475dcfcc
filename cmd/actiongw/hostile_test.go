//go:build linux

package main

import (
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/internal/redact"
	"github.com/actiongw/actiongw/internal/testkit/proc"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/mcpserver/mcphost"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hostileAgent attacks the server as a prompt-injected agent would, through
// the MCP tools only, against a real sshd, the real keyring and a small
// HTTP server that reflects what it gets: each class of issue 14 that got
// a credential back, acted outside policy or stopped the gateway. It runs
// as part of the release gate.
func hostileAgent(t *testing.T) {
	t.Run("one call cannot brick the server", hostileHugeCommand)
	t.Run("headers that change the response are refused; header names redacted", hostileSpecialHeaders)
	t.Run("encodings of the credential are redacted", hostileForms)
	t.Run("a key's whole forms are redacted", hostileKeyLines)
	t.Run("the end of an output is no oracle", hostileEndOfOutput)
	t.Run("base64 of longer data is redacted at every offset and width", hostileWrappedBase64)
	t.Run("a stream cut in a secret keeps it", hostileCutStream)
	t.Run("policy decided on the normalized request", hostileNormalizedPath)
	t.Run("a command cannot drop a shared connection", hostileDropConnection)
	t.Run("search and reads are bounded", hostileSearch)
	t.Run("the spool cap counts every file", hostileSpoolFiles)
	t.Run("a short secret fails its target, not the server", hostileShortSecret)
	t.Run("a state directory others can write is refused", hostileOpenStateDir)
	t.Run("a query credential is not sent on in a Referer", hostileReferer)
	t.Run("background actions cannot take the server, nor show a secret", hostileBackground)
}

// hostileBackground: an agent that starts as many background actions as it
// can is stopped at max_background_actions with a clear answer, the server
// goes on answering, list_actions never shows a credential, and
// cancel_action only takes handles.
func hostileBackground(t *testing.T) {
	s := startServedWith(t, servedOptions{server: "max_background_actions = 3"})
	var handles []string
	for range 3 {
		handles = append(handles, s.startBackground(t, "box", "sleep 60"))
	}
	r := s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "sleep 60", "wait_s": 0})
	if text := resultText(r); !r.IsError || !strings.Contains(text, "max_background_actions") || !strings.Contains(text, "cancel_action") {
		t.Errorf("a fourth background action: %s; want busy, naming max_background_actions and cancel_action", text)
	}
	s.promptly(t) // a foreground call still runs
	// A command that carries the credential is listed redacted.
	s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "true " + s.token})
	list := s.call(t, "list_actions", map[string]any{})
	if b, _ := json.Marshal(list); strings.Contains(string(b), s.token) || !strings.Contains(string(b), "[REDACTED:api-token]") {
		t.Errorf("list_actions shows the credential or no marker: %s", b)
	}
	for _, h := range []string{"", "../../etc/passwd", strings.Repeat("x", 10000)} {
		if r := s.call(t, "cancel_action", map[string]any{"handle": h}); !r.IsError || len(resultText(r)) > 1000 {
			t.Errorf("cancel_action %.20q: %s; want a short error", h, resultText(r))
		}
	}
	for _, h := range handles {
		if out := decode[gateway.SSHExecOutput](t, s.call(t, "cancel_action", map[string]any{"handle": h})); out.Status != gateway.StatusCancelled {
			t.Errorf("cancel_action %s: %+v", h, out)
		}
	}
	// Slots are free again.
	s.call(t, "cancel_action", map[string]any{"handle": s.startBackground(t, "box", "sleep 60")})
	s.client.Close()
	s.assertNoSecretIn(t, s.token)
}

// mirror is an HTTP API that reflects the request's credential in every
// form a hostile agent could ask for.
type mirror struct {
	srv *httptest.Server
}

func startMirror(t *testing.T) *mirror {
	m := &mirror{}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

// endpointTOML configures the endpoint "mirror", with the keyring's
// api-token as its bearer credential.
func (m *mirror) endpointTOML(extra string) string {
	return fmt.Sprintf("[http.mirror]\nbase_url = %q\nmethods = [\"GET\", \"POST\"]\npaths = [\"/echo/**\", \"/form/*\"]\nauth = \"bearer\"\ntoken_secret = \"api-token\"\nallow_private = true\nresponse_headers = [\"X-*\"]\n%s", m.srv.URL, extra)
}

func (m *mirror) serve(w http.ResponseWriter, r *http.Request) {
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	body := "auth=" + r.Header.Get("Authorization") + "\n"
	switch r.URL.Path {
	case "/form/json":
		b, _ := json.Marshal(map[string]string{"token": token})
		body = string(b) + "\n"
	case "/form/base64":
		body = base64.StdEncoding.EncodeToString([]byte(r.Header.Get("Authorization"))) + "\n"
	case "/form/base64url":
		body = base64.RawURLEncoding.EncodeToString([]byte("x"+token+"yz")) + "\n"
	case "/form/hex":
		body = hex.EncodeToString([]byte(token)) + "|" + strings.ToUpper(hex.EncodeToString([]byte(token))) + "\n"
	case "/form/header-name":
		w.Header().Set("X-"+token, "1")
	case "/form/redirect":
		http.Redirect(w, r, "/form/landing?"+r.URL.RawQuery, http.StatusFound)
		return
	case "/form/landing":
		body = "referer=" + r.Header.Get("Referer") + "\n"
	}
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Header().Set("Content-Encoding", "gzip")
		gz := gzip.NewWriter(w)
		gz.Write([]byte(body))
		gz.Close()
		return
	}
	http.ServeContent(w, r, "", time.Time{}, strings.NewReader(body)) // honours Range
}

// hostileHugeCommand: a 4.1 MB command of '<' (each JSON-escaped to six
// bytes) once became a 24.6 MB audit line, after which `audit verify` failed
// and serve refused to start. Any huge field does the same. Now it is refused before the intent, the
// records stay small, the log verifies, and a new server starts on it.
func hostileHugeCommand(t *testing.T) {
	s := startServed(t, "signal")
	// '<' is six bytes in JSON as the client writes it: 600,000 of them
	// make a 3.6 MB frame, under the wire limit.
	for _, command := range []string{strings.Repeat("a", 4_100_000), strings.Repeat("<", 600_000), "echo " + strings.Repeat("<", 70_000)} {
		r := s.call(t, "ssh_exec", map[string]any{"target": "box", "command": command})
		if !r.IsError || !strings.Contains(resultText(r), "max_command_bytes") {
			t.Errorf("a %d-byte command: %s; want it refused for max_command_bytes", len(command), output.Clip(resultText(r), 300))
		}
	}
	log := readAuditLog(t, s.state)
	for i, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if len(line) > 64<<10 {
			t.Errorf("audit line %d is %d bytes; want every record bounded", i+1, len(line))
		}
	}
	if _, err := audit.Verify(audit.Path(s.state)); err != nil {
		t.Errorf("audit verify after the huge commands: %v", err)
	}
	other := s.startServer(t, &syncbuf.Buffer{})
	if r := callOn(t, other, "ssh_exec", map[string]any{"target": "box", "command": "echo restarted"}); r.IsError {
		t.Errorf("a new server on the same state: %s", resultText(r))
	}
}

// hostileSpecialHeaders: Accept-Encoding had a reflecting server send the
// credential gzipped past redaction, Range in two halves, and the method
// override family carried calls past the allowed methods. They are refused,
// naming the key that would allow them.
func hostileSpecialHeaders(t *testing.T) {
	m := startMirror(t)
	s := startServedWith(t, servedOptions{tables: m.endpointTOML("")})
	// A header name the server fills with the credential is redacted too.
	if r := s.call(t, "http_request", map[string]any{"endpoint": "mirror", "method": "GET", "path": "/form/header-name"}); r.IsError {
		t.Errorf("header-name echo: %s", resultText(r))
	}
	for _, h := range []map[string]string{
		{"Accept-Encoding": "gzip"},
		{"Range": "bytes=0-9"},
		{"X-HTTP-Method-Override": "DELETE"},
		{"X-Method-Override": "PUT"},
	} {
		r := s.call(t, "http_request", map[string]any{"endpoint": "mirror", "method": "GET", "path": "/echo/x", "headers": h})
		if !r.IsError || !strings.Contains(resultText(r), "allow_special_headers") {
			t.Errorf("header %v: %s; want it refused, naming allow_special_headers", h, resultText(r))
		}
	}
	s.client.Close()
	s.assertNoSecretIn(t, s.token)
}

// hostileForms: a reflecting server echoes the credential JSON-escaped,
// base64 at other alignments, base64url, hex and in a header name.
func hostileForms(t *testing.T) {
	m := startMirror(t)
	// A token with characters JSON escapes, long enough for every form.
	token := `tok"` + randomHex(t, 8) + `\/<&>`
	s := startServedWith(t, servedOptions{tables: m.endpointTOML(""), token: token})
	for _, path := range []string{"/echo/plain", "/form/json", "/form/base64", "/form/base64url", "/form/hex"} {
		r := s.call(t, "http_request", map[string]any{"endpoint": "mirror", "method": "GET", "path": path})
		if r.IsError {
			t.Errorf("%s: %s", path, resultText(r))
		}
	}
	s.client.Close()
	s.assertNoSecretIn(t, token)
}

// hostileKeyLines: the SSH private key is one secret; on a host holding a
// copy, commands that print all of it, less its last line end, with CRLF
// line ends, or its body alone, get nothing of it back. (A part of it,
// `sed -n 3p`, is no pattern of its own: a redactor that replaced parts
// would tell a right guess of one from a wrong one.)
func hostileKeyLines(t *testing.T) {
	s := startServed(t, "signal")
	keyFile := filepath.Join(s.sshd.UserDir(t), "id")
	if err := os.WriteFile(keyFile, s.sshd.ClientKey, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, command := range []string{
		"cat " + keyFile,
		"head -c -1 " + keyFile,
		"sed 's/$/\\r/' " + keyFile,
		"grep -v -- ----- " + keyFile,
		"grep -v -- ----- " + keyFile + " | tr -d '\\n'",
	} {
		r := s.call(t, "ssh_exec", map[string]any{"target": "box", "command": command})
		if out := decode[gateway.SSHExecOutput](t, r); out.Stdout.Bytes == 0 {
			t.Errorf("%s: printed nothing (%s)", command, resultText(r))
		}
	}
	s.client.Close()
	s.assertNoSecretIn(t, string(s.sshd.ClientKey))
}

// hostileCutStream: a stream cut early (timeout) right after most of the
// token once released the held-back bytes: the token minus its last
// character. Now they are replaced.
func hostileCutStream(t *testing.T) {
	s := startServed(t, "signal")
	// The target holds a copy of the token, as a host using it would.
	file := filepath.Join(s.sshd.UserDir(t), "token")
	if err := os.WriteFile(file, []byte(s.token), 0o644); err != nil {
		t.Fatal(err)
	}
	partial := s.token[:len(s.token)-1]
	r := s.call(t, "ssh_exec", map[string]any{"target": "box", "timeout_s": 1,
		"command": fmt.Sprintf("head -c %d %s; sleep 100", len(partial), file)})
	out := decode[gateway.SSHExecOutput](t, r)
	if out.Status != "timeout" || out.Stdout.Bytes == 0 {
		t.Errorf("status %s, %d bytes; want a timeout after the partial token", out.Status, out.Stdout.Bytes)
	}
	if p := s.call(t, "read_output", map[string]any{"handle": out.Handle, "stream": "stdout"}); p.IsError {
		t.Errorf("read_output: %s", resultText(p))
	}
	s.client.Close()
	s.assertNoSecretIn(t, partial)
}

// hostileNormalizedPath: a path that only the normalized check denies was
// audited as allowed.
func hostileNormalizedPath(t *testing.T) {
	m := startMirror(t)
	s := startServedWith(t, servedOptions{tables: m.endpointTOML("")})
	r := s.call(t, "http_request", map[string]any{"endpoint": "mirror", "method": "GET", "path": "/echo/../redirect"})
	if !r.IsError || !strings.Contains(resultText(r), "denied by policy") {
		t.Errorf("/echo/../redirect: %s; want denied", resultText(r))
	}
	log := readAuditLog(t, s.state)
	if !strings.Contains(log, `"path":"/redirect","decision":"deny"`) {
		t.Errorf("the denial is not audited on the normalized path:\n%s", log)
	}
}

// hostileDropConnection: a NUL byte, or a command over sshd's packet
// limit, once made sshd drop the pooled connection, failing every other
// call on it.
func hostileDropConnection(t *testing.T) {
	s := startServedWith(t, servedOptions{tables: "[ssh.wide]\nhost = \"127.0.0.1\"\nport = @PORT@\nuser = \"@USER@\"\nkey_secret = \"box-key\"\nknown_hosts = \"@KNOWN_HOSTS@\"\nmax_command_bytes = 65536\n"})
	long := s.start(t, "ssh_exec", map[string]any{"target": "wide", "command": "sleep 2; echo survived"})
	testenv.WaitFor(t, 20*time.Second, "the long command to run", func() bool { return s.health(t).ActiveActions == 1 })
	for _, command := range []string{"echo a\x00b", strings.Repeat("'", 65536)} {
		if r := s.call(t, "ssh_exec", map[string]any{"target": "wide", "command": command}); !r.IsError {
			t.Errorf("a %d-byte command with a NUL or many quotes: %s; want it refused", len(command), resultText(r))
		}
	}
	r, err := long.WaitTool(context.Background())
	if err != nil || decode[gateway.SSHExecOutput](t, r).Stdout.Head != "survived\n" {
		t.Errorf("the command sharing the connection: %v %s; want it to end by itself", err, resultText(r))
	}
}

// hostileSearch: a search over a 9 MB single line with a pathological
// pattern ran 29 s, said truncated: false, and burned CPU after a cancel;
// 60 concurrent searches and 500 reads reached 547 MiB. Now searches stop
// and say so, and the server stays under 200 MiB.
func hostileSearch(t *testing.T) {
	s := startServedWith(t, servedOptions{server: "retain_head_bytes = 16777216\nmax_concurrent_actions = 64"})
	r := s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "head -c 9000000 /dev/zero | tr '\\0' a"})
	out := decode[gateway.SSHExecOutput](t, r)
	for _, pattern := range []string{"[ab]{300}c", "(a|aa)*c", "a.*b"} {
		r := s.call(t, "search_output", map[string]any{"handle": out.Handle, "stream": "stdout", "pattern": pattern})
		if r.IsError {
			if !strings.Contains(resultText(r), "pattern") {
				t.Errorf("search %q: %s; want a result or a refused pattern", pattern, resultText(r))
			}
			continue
		}
		res := decode[output.SearchResult](t, r)
		if len(res.Matches) != 0 || (res.Truncated && res.Reason == "") {
			t.Errorf("search %q: %+v; want no match, and a reason if it stopped", pattern, res)
		}
	}
	pid := s.client.Pid()
	var wg sync.WaitGroup
	for i := range 560 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			args := map[string]any{"handle": out.Handle, "stream": "stdout", "offset": i * 1000, "limit": 1 << 20}
			tool := "read_output"
			if i%10 == 0 {
				tool, args = "search_output", map[string]any{"handle": out.Handle, "stream": "stdout", "pattern": "a{50}b"}
			}
			if _, err := s.client.CallTool(ctx, tool, args, nil); err != nil {
				t.Errorf("%s: %v", tool, err)
			}
		})
	}
	wg.Wait()
	if peak, err := proc.Memory(pid, "VmHWM"); err != nil || peak > 200<<20 {
		t.Errorf("serve's peak memory through 60 searches and 500 reads: %d MiB, %v; want under 200", peak>>20, err)
	}
	s.promptly(t)
}

// hostileSpoolFiles: spool_max_bytes = 1024 and 2000 small calls left 2000
// action directories: the cap counted payload only. (The newest 16
// finished actions, max_concurrent_actions, stay past the cap.)
func hostileSpoolFiles(t *testing.T) {
	s := startServedWith(t, servedOptions{server: "spool_max_bytes = 65536\nmax_concurrent_actions = 16"})
	var wg sync.WaitGroup
	for range 300 {
		wg.Go(func() { s.call(t, "http_request", map[string]any{"endpoint": "api", "method": "GET", "path": "/x"}) })
	}
	wg.Wait()
	var dirs int
	filepath.WalkDir(filepath.Join(s.state, "spool"), func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasPrefix(d.Name(), "out_") {
			dirs++
		}
		return nil
	})
	if dirs > 30 {
		t.Errorf("%d action directories in a spool capped at 64 KiB; want the cap to bound them", dirs)
	}
}

// hostileShortSecret: a secret under 4 bytes passed `secret set` and made
// serve exit. Now serve runs, the targets that use it fail with the same
// error on every call, and the others work.
func hostileShortSecret(t *testing.T) {
	s := startServedWith(t, servedOptions{token: "abc"})
	for range 2 {
		r := s.call(t, "http_request", map[string]any{"endpoint": "api", "method": "GET", "path": "/"})
		if !r.IsError || !strings.Contains(resultText(r), "shorter than 4 bytes") {
			t.Errorf("endpoint with a 3-byte token: %s; want it refused for the short secret", resultText(r))
		}
	}
	s.promptly(t)
}

// hostileOpenStateDir: a state directory others can write is refused; a
// config others can read is warned about.
func hostileOpenStateDir(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(state, 0o777) // past the umask
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[server]\nstate_dir = %q\n", state)), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := func() ([]byte, error) {
		cmd := exec.Command(actiongwBinary(t), "serve", "-config", cfg)
		cmd.Env = append(os.Environ(), "ACTIONGW_KEYRING_SERVICE=actiongw-test-"+randomHex(t, 6))
		return cmd.CombinedOutput() // stdin is /dev/null: serve ends at once
	}
	// Served, so that the client sees why; but nothing runs, and nothing
	// is written where others could rewrite it.
	cmd := exec.Command(actiongwBinary(t), "serve", "-config", cfg)
	cmd.Env = append(os.Environ(), "ACTIONGW_KEYRING_SERVICE=actiongw-test-"+randomHex(t, 6))
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	client, err := mcphost.Start(context.Background(), cmd, mcphost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.Initialize(ctx); err != nil {
		t.Fatalf("initialize: %v\n%s", err, stderr)
	}
	for tool, args := range map[string]map[string]any{"list_targets": {}, "read_output": {"handle": "x", "stream": "stdout"}} {
		r := callOn(t, client, tool, args)
		if text := resultText(r); !r.IsError || !strings.Contains(text, "writable by other users") || !strings.Contains(text, "chmod 700") {
			t.Errorf("%s on a 0777 state directory: %s\nwant it refused, naming chmod 700", tool, text)
		}
	}
	client.Close()
	if entries, _ := os.ReadDir(state); len(entries) > 0 {
		t.Errorf("serve wrote %d entries into a state directory others can write", len(entries))
	}
	// A config others can read is served, with a warning.
	os.Chmod(state, 0o700)
	os.Chmod(cfg, 0o644)
	if out, err := serve(); err != nil || !strings.Contains(string(out), "readable by other users") {
		t.Errorf("serve with a config mode 0644: %v\n%s\nwant it served, with a warning", err, out)
	}
}

// hostileReferer: with auth = "query", a followed redirect carried the
// token on in the Referer header, which the landing page echoed.
func hostileReferer(t *testing.T) {
	m := startMirror(t)
	tables := fmt.Sprintf("[http.mirrorq]\nbase_url = %q\npaths = [\"/form/*\"]\nauth = \"query\"\nparam = \"key\"\ntoken_secret = \"api-token\"\nallow_private = true\nfollow_redirects = \"same-origin\"\n", m.srv.URL)
	s := startServedWith(t, servedOptions{tables: tables})
	r := s.call(t, "http_request", map[string]any{"endpoint": "mirrorq", "method": "GET", "path": "/form/redirect"})
	if out := decode[gateway.HTTPRequestOutput](t, r); r.IsError || out.Body.Head != "referer=\n" {
		t.Errorf("the landing page of a followed redirect: %s; want it to see no Referer", resultText(r))
	}
	s.client.Close()
	s.assertNoSecretIn(t, s.token)
}

// callOn calls a tool on another server's client.
func callOn(t *testing.T, c *mcphost.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.CallTool(ctx, name, args, nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// assertNoSecretIn checks that no form of secret reached the host, stderr
// or any file of the state directory.
func (s *served) assertNoSecretIn(t *testing.T, secret string) {
	t.Helper()
	// The forms are matched with the line breaks of wrapped encodings
	// left out: look in the texts without any line break too, and without
	// the escaped ones of JSON.
	forms := redact.Forms([]byte(secret))
	unbroken := strings.NewReplacer("\r", "", "\n", "", `\r`, "", `\n`, "")
	var files strings.Builder
	filepath.Walk(s.state, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			data, _ := os.ReadFile(path)
			files.Write(data)
		}
		return nil
	})
	for what, text := range map[string]string{"the host": s.seen.String(), "stderr": s.stderr.String(), "the state directory": files.String()} {
		for _, f := range forms {
			if strings.Contains(text, f) || strings.Contains(unbroken.Replace(text), unbroken.Replace(f)) {
				t.Errorf("%s holds a form of the secret (%q)", what, output.Clip(f, 20))
			}
		}
	}
}
