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

	"github.com/actiongw/actiongw/internal/testenv"
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
