//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/secrets"
)

func TestTrimNewline(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"token with LF", "ghp_abc\n", "ghp_abc"},
		{"token with CRLF", "ghp_abc\r\n", "ghp_abc"},
		{"token without newline", "ghp_abc", "ghp_abc"},
		{"only one newline dropped", "ghp_abc\n\n", "ghp_abc\n\n"},
		{"PEM keeps its final newline", "-----BEGIN KEY-----\nAAAA\n-----END KEY-----\n", "-----BEGIN KEY-----\nAAAA\n-----END KEY-----\n"},
		{"multi-line without final newline", "a\nb", "a\nb"},
		{"lone newline", "\n", ""},
		{"empty", "", ""},
		{"trailing CR only", "abc\r", "abc\r"},
	}
	for _, c := range cases {
		if got := string(trimNewline([]byte(c.in))); got != c.want {
			t.Errorf("%s: trimNewline(%q): got %q; want %q", c.name, c.in, got, c.want)
		}
	}
}

// These calls are refused before the keyring is touched.
func TestSecretUsage(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "no subcommand"},
		{[]string{"get", "x"}, `unknown subcommand "get"`},
		{[]string{"set"}, "want a NAME"},
		{[]string{"set", "a", "b"}, `unexpected argument "b"`},
		{[]string{"set", "two words"}, "bad secret name"},
		{[]string{"set", "a/b"}, "bad secret name"},
		{[]string{"delete"}, "want a NAME"},
		{[]string{"list", "extra"}, `unexpected argument "extra"`},
		{[]string{"list", "-nope"}, "flag provided but not defined"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		cl := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
		err := cl.secret(t.Context(), c.args)
		var uerr *usageError
		if !errors.As(err, &uerr) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("secret %q: got %v; want a usage error containing %q", c.args, err, c.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("secret %q: got stdout %q; want none", c.args, stdout.String())
		}
	}
}

// canaryEnv is an environment whose every writable place (HOME, XDG
// directories, TMPDIR) lies under root, so that the test can search all
// files the command wrote.
func canaryEnv(t *testing.T, root string) []string {
	env := []string{}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "TMPDIR", "ACTIONGW_CONFIG":
			continue
		}
		env = append(env, kv)
	}
	for k, dir := range map[string]string{"HOME": "home", "XDG_CONFIG_HOME": "config", "XDG_STATE_HOME": "state", "XDG_CACHE_HOME": "cache", "XDG_DATA_HOME": "data", "TMPDIR": "tmp"} {
		p := filepath.Join(root, dir)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		env = append(env, k+"="+p)
	}
	return env
}

// TestSecretCanary stores a secret with the CLI and runs every secret
// command and check, at debug log level, asserting the value shows up in
// no output and no file written.
func TestSecretCanary(t *testing.T) {
	testenv.SecretService(t)
	bin := actiongwBinary(t)
	root := t.TempDir()
	env := canaryEnv(t, root)

	suffix := strings.ToLower(rand.Text()[:8])
	keyName, tokenName := "canary-key-"+suffix, "canary-token-"+suffix
	kr := &secrets.Keyring{Service: "actiongw-test-" + suffix}
	env = append(env, "ACTIONGW_KEYRING_SERVICE="+kr.Service)
	canary := "CANARY" + rand.Text()
	key := "-----BEGIN OPENSSH PRIVATE KEY-----\n" + canary + "\n" + rand.Text() + "\n-----END OPENSSH PRIVATE KEY-----\n"
	token := "tok_" + canary
	t.Cleanup(func() {
		kr.Delete(context.Background(), keyName)
		kr.Delete(context.Background(), tokenName)
	})

	config := filepath.Join(root, "config.toml")
	err := os.WriteFile(config, []byte(fmt.Sprintf(`[server]
state_dir = %q
log_level = "debug"

[ssh.web1]
host = "127.0.0.1"
port = 1
user = "deploy"
key_secret = %q
host_key = "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

[http.api]
base_url = "http://127.0.0.1:1/"
auth = "bearer"
token_secret = %q
allow_private = true
`, filepath.Join(root, "state"), keyName, tokenName)), 0o600)
	if err != nil {
		t.Fatal(err)
	}

	// What would betray the value: the canary itself, or the value in the
	// encodings a careless log line or error might use.
	forbidden := []string{
		canary,
		hex.EncodeToString([]byte(canary)),
		base64.StdEncoding.EncodeToString([]byte(key))[:40],
		base64.StdEncoding.EncodeToString([]byte(token))[:20],
		fmt.Sprint([]byte(canary))[1:40],
	}
	var transcript strings.Builder
	run := func(stdin string, wantOK bool, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		cmd.Dir = root
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("actiongw %q: %v", args, err)
		}
		if got := err == nil; wantOK && !got {
			t.Errorf("actiongw %q: got %v; want success\nstdout: %s\nstderr: %s", args, err, &stdout, &stderr)
		}
		out := stdout.String() + stderr.String()
		for _, f := range forbidden {
			if strings.Contains(out, f) {
				t.Errorf("actiongw %q printed the secret (%q)\nstdout: %s\nstderr: %s", args, f, &stdout, &stderr)
			}
		}
		fmt.Fprintf(&transcript, "$ actiongw %s\n%s", strings.Join(args, " "), out)
		return stdout.String()
	}

	run(key, true, "secret", "set", keyName)
	run(token+"\n", true, "secret", "set", tokenName)
	for name, want := range map[string]string{keyName: key, tokenName: token} {
		got, err := kr.Get(t.Context(), name)
		if err != nil || string(got.Reveal()) != want {
			t.Errorf("keyring after secret set %s: got %d bytes, %v; want %d bytes, byte for byte", name, got.Len(), err, len(want))
		}
	}
	out := run("", true, "secret", "list", "-config", config)
	for _, name := range []string{keyName, tokenName} {
		if !strings.Contains(out, name) || strings.Contains(out, "missing") {
			t.Errorf("secret list: got %q; want %s listed as stored", out, name)
		}
	}
	run("", false, "check", "-config", config)
	run("", true, "secret", "delete", tokenName)
	out = run("", true, "secret", "list", "-config", config)
	if !strings.Contains(out, "missing") {
		t.Errorf("secret list after delete: got %q; want %s missing", out, tokenName)
	}
	run("", false, "check", "-config", config)
	run("", true, "secret", "delete", keyName)
	run("", false, "secret", "delete", keyName)

	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, f := range forbidden {
			if bytes.Contains(b, []byte(f)) {
				t.Errorf("%s holds the secret (%q)", path, f)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("transcript:\n%s", &transcript)
}

// TestSecretSetPrompt types a secret at a real terminal (a pty) and checks
// that it is not echoed, and that it is stored without the Enter.
func TestSecretSetPrompt(t *testing.T) {
	testenv.SecretService(t)
	bin := actiongwBinary(t)
	master, slave := openPTY(t)
	name := "prompt-" + strings.ToLower(rand.Text()[:8])
	value := "typed-" + rand.Text()
	kr := &secrets.Keyring{Service: "actiongw-test-" + name}
	t.Cleanup(func() { kr.Delete(context.Background(), name) })

	cmd := exec.Command(bin, "secret", "set", name)
	cmd.Env = append(os.Environ(), "ACTIONGW_KEYRING_SERVICE="+kr.Service)
	screen := startOnPTY(t, cmd, master, slave)

	// Type only once the prompt has turned echo off, as a person would.
	testenv.WaitFor(t, 30*time.Second, "the prompt to turn echo off", func() bool {
		tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
		return err == nil && tio.Lflag&unix.ECHO == 0
	})
	slave.Close()
	if _, err := master.Write([]byte(value + "\r")); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	got := string(<-screen)
	if err != nil {
		t.Fatalf("secret set at a terminal: %v\nscreen: %q", err, got)
	}
	if !strings.Contains(got, "typing is not shown") || !strings.Contains(got, "stored secret") {
		t.Errorf("screen: got %q; want the prompt and the confirmation", got)
	}
	if strings.Contains(got, value) {
		t.Errorf("screen: got %q; want no echo of the value", got)
	}
	v, err := kr.Get(t.Context(), name)
	if err != nil || string(v.Reveal()) != value {
		t.Errorf("keyring: got %q, %v; want %q", v.Reveal(), err, value)
	}
}

// startOnPTY starts cmd with the terminal slave as its controlling
// terminal and stdin, stdout and stderr; the channel gets all it wrote
// once it exited.
func startOnPTY(t *testing.T, cmd *exec.Cmd, master, slave *os.File) <-chan []byte {
	t.Helper()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	screen := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(master) // ends with EIO once the command exits
		screen <- b
	}()
	return screen
}

// openPTY opens a pseudo-terminal pair.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		testenv.Missing(t, "a pseudo-terminal", fmt.Sprintf("open /dev/ptmx: %v", err))
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

// readRecorder fails the read and remembers that someone tried.
type readRecorder struct{ read bool }

func (r *readRecorder) Read([]byte) (int, error) { r.read = true; return 0, io.EOF }

// Without a Secret Service, secret set fails before it reads (or prompts
// for) the value.
func TestSecretSetNoServiceFailsBeforeReading(t *testing.T) {
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+filepath.Join(t.TempDir(), "no-bus"))
	stdin := &readRecorder{}
	var stdout, stderr bytes.Buffer
	cl := &cli{stdin: stdin, stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
	err := cl.secret(t.Context(), []string{"set", "web1-key"})
	if !errors.Is(err, secrets.ErrNoService) {
		t.Errorf("secret set: got %v; want ErrNoService", err)
	}
	if stdin.read {
		t.Error("secret set read stdin; want it to fail first")
	}
}

// guessableConfig uses a keyring item for every kind of field that holds a
// guessable secret, one kind each (the items of guessableFields), and one
// for a private key; no target is reachable.
const guessableConfig = `[server]
state_dir = %q
[ssh.pw]
host = "127.0.0.1"
port = 1
user = "deploy"
password_secret = "s-ssh-password"
host_key = "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
allow_sudo = true
sudo_secret = "s-sudo"
[ssh.key]
host = "127.0.0.1"
port = 1
user = "deploy"
key_secret = "s-key"
passphrase_secret = "s-passphrase"
host_key = "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
[http.bearer]
base_url = "http://127.0.0.1:1/"
allow_private = true
auth = "bearer"
token_secret = "s-bearer"
[http.basic]
base_url = "http://127.0.0.1:1/"
allow_private = true
auth = "basic"
user = "deploy"
password_secret = "s-basic"
[http.header]
base_url = "http://127.0.0.1:1/"
allow_private = true
auth = "header"
header = "X-Key"
token_secret = "s-header"
[http.query]
base_url = "http://127.0.0.1:1/"
allow_private = true
auth = "query"
param = "key"
token_secret = "s-query"
[http.cc]
base_url = "http://127.0.0.1:1/"
allow_private = true
auth = "oauth2_client_credentials"
token_url = "http://127.0.0.1:1/token"
client_id = "c"
client_secret_secret = "s-client-secret"
[http.rt]
base_url = "http://127.0.0.1:1/"
allow_private = true
auth = "oauth2_refresh_token"
token_url = "http://127.0.0.1:1/token"
client_id = "c"
refresh_token_secret = "s-refresh"
`

// guessableFields are the items of guessableConfig with the field that
// uses each, and a weak value for it: what guessing tries first (a word
// and a year, a keyboard walk, a repeat), each judged well under 60 bits.
var guessableFields = []struct{ item, field, weak string }{
	{"s-ssh-password", "ssh.pw.password_secret", "Dragon1987"},
	{"s-sudo", "ssh.pw.sudo_secret", "qwertyuiop123"},
	{"s-passphrase", "ssh.key.passphrase_secret", "Monkey!2023"},
	{"s-bearer", "http.bearer.token_secret", "letmein99"},
	{"s-basic", "http.basic.password_secret", "1q2w3e4r5t6y"},
	{"s-header", "http.header.token_secret", "trustno1trustno1"},
	{"s-query", "http.query.token_secret", "iloveyou2"},
	{"s-client-secret", "http.cc.client_secret_secret", "sunshine777"},
	{"s-refresh", "http.rt.refresh_token_secret", "football!!"},
}

// guessableEnv writes guessableConfig and returns its path, and the
// environment of a command on a keyring service of its own whose items
// are removed at cleanup.
func guessableEnv(t *testing.T) (cfgPath string, env []string, kr *secrets.Keyring) {
	t.Helper()
	testenv.SecretService(t)
	root := t.TempDir()
	cfgPath = filepath.Join(root, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(guessableConfig, filepath.Join(root, "state"))), 0o600); err != nil {
		t.Fatal(err)
	}
	kr = &secrets.Keyring{Service: "actiongw-test-" + randomHex(t, 6)}
	t.Cleanup(func() {
		for _, f := range guessableFields {
			kr.Delete(context.Background(), f.item)
		}
		for _, name := range []string{"s-key", "s-unnamed"} {
			kr.Delete(context.Background(), name)
		}
	})
	return cfgPath, append(canaryEnv(t, root), "ACTIONGW_KEYRING_SERVICE="+kr.Service), kr
}

// assertNoPart fails when out holds the value or any 5 bytes of it in a
// row, in any case: a warning names the item, never what it holds.
func assertNoPart(t *testing.T, what, out, value string) {
	t.Helper()
	lower := strings.ToLower(out)
	for i := 0; i+5 <= len(value); i++ {
		if part := strings.ToLower(value[i : i+5]); strings.Contains(lower, part) {
			t.Errorf("%s printed part of the value (%q):\n%s", what, part, out)
			return
		}
	}
}

// TestSecretSetWeak stores weak and strong values with the real secret set
// for each kind of guessable field, and values no config judges or names:
// a weak one is warned about on stderr, naming the item and the field,
// with why and what to do, never the value; a strong one is not.
func TestSecretSetWeak(t *testing.T) {
	cfgPath, env, kr := guessableEnv(t)
	bin := actiongwBinary(t)
	set := func(t *testing.T, value string, env []string, args ...string) (stdout, stderr string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"secret", "set"}, args...)...)
		stdin := value + "\n" // as echo sends a one-line value; a key file comes as it is
		if strings.Contains(value, "\n") {
			stdin = value
		}
		cmd.Env, cmd.Stdin = env, strings.NewReader(stdin)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("secret set %q: %v\n%s%s", args, err, &o, &e)
		}
		name := args[len(args)-1]
		if v, err := kr.Get(t.Context(), name); err != nil || string(v.Reveal()) != value {
			t.Fatalf("secret set %s: the keyring holds %d bytes, %v; want the value stored even when weak", name, v.Len(), err)
		}
		assertNoPart(t, "secret set "+name, o.String()+e.String(), value)
		return o.String(), e.String()
	}
	why := []string{"could be found by trying", "under 2^60 guesses", "see whether they come back redacted", "audit event", "longer random value"}
	for _, f := range guessableFields {
		t.Run(f.field, func(t *testing.T) {
			_, stderr := set(t, f.weak, env, "-config", cfgPath, f.item)
			for _, w := range append([]string{`warning: secret "` + f.item + `" is weak`, "used as " + f.field, "actiongw secret set " + f.item}, why...) {
				if !strings.Contains(stderr, w) {
					t.Errorf("weak value: stderr lacks %q:\n%s", w, stderr)
				}
			}
			strong := "tok_" + rand.Text()
			if _, stderr := set(t, strong, env, "-config", cfgPath, f.item); stderr != "" {
				t.Errorf("strong value: stderr %q; want none", stderr)
			}
		})
	}
	t.Run("config from ACTIONGW_CONFIG", func(t *testing.T) {
		_, stderr := set(t, "Dragon1987", append(env, "ACTIONGW_CONFIG="+cfgPath), "s-ssh-password")
		if !strings.Contains(stderr, "used as ssh.pw.password_secret") {
			t.Errorf("stderr %q; want the warning to name the field from the default lookup's config", stderr)
		}
	})
	t.Run("used as a private key", func(t *testing.T) {
		if _, stderr := set(t, "Dragon1987", env, "-config", cfgPath, "s-key"); stderr != "" {
			t.Errorf("stderr %q; want none: key_secret is not judged (check says whether it is a key)", stderr)
		}
	})
	t.Run("named by no config", func(t *testing.T) {
		_, stderr := set(t, "Princess2020", env, "s-unnamed")
		for _, w := range append([]string{`secret "s-unnamed" is weak`, "no config names it"}, why...) {
			if !strings.Contains(stderr, w) {
				t.Errorf("stderr lacks %q:\n%s", w, stderr)
			}
		}
		if _, stderr := set(t, "baseball1234", env, "-config", cfgPath, "s-unnamed"); !strings.Contains(stderr, "no config names it") {
			t.Errorf("an item the config does not name: stderr %q; want it judged alone", stderr)
		}
		pem := "-----BEGIN OPENSSH PRIVATE KEY-----\nDragon1987\n-----END OPENSSH PRIVATE KEY-----\n"
		if _, stderr := set(t, pem, env, "s-unnamed"); stderr != "" {
			t.Errorf("a PEM block: stderr %q; want none", stderr)
		}
	})
	t.Run("config asked for that does not load", func(t *testing.T) {
		cmd := exec.Command(bin, "secret", "set", "-config", filepath.Join(t.TempDir(), "none.toml"), "s-unnamed")
		cmd.Env, cmd.Stdin = env, strings.NewReader("Dragon1987")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "no config at") {
			t.Errorf("got %v, %s; want the missing config named before the value is read", err, out)
		}
	})
}

// BenchmarkWeak measures the estimate on a token, and on the values
// maxJudgedRunes keeps from taking seconds: long ones, random or made of
// repeats (zxcvbn's slowest matchers).
func BenchmarkWeak(b *testing.B) {
	long := strings.Repeat(rand.Text(), 200)
	for _, bc := range []struct{ name, value string }{
		{"token", "tok_" + rand.Text()},
		{"random 4 KiB", long[:4096]},
		{"repeats 4 KiB", strings.Repeat("ab", 2048)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.value)))
			for b.Loop() {
				weak([]byte(bc.value))
			}
		})
	}
}
