//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/secrets"
)

// importSetup makes a temp HOME with an ssh config (web1 with a key file,
// web2 with two, agentbox with none, a wildcard entry, an Include) and
// returns the env for the binary, the root, and the key files' contents.
func importSetup(t *testing.T) (env []string, root string, keys map[string]string, kr *secrets.Keyring) {
	t.Helper()
	root = t.TempDir()
	env = canaryEnv(t, root)
	home := filepath.Join(root, "home")
	suffix := strings.ToLower(rand.Text()[:8])
	kr = &secrets.Keyring{Service: "actiongw-test-import-" + suffix}
	env = append(env, "ACTIONGW_KEYRING_SERVICE="+kr.Service)
	keys = map[string]string{}
	for _, name := range []string{"id_web1", "id_web2", "id_web2_old"} {
		keys[name] = "-----BEGIN OPENSSH PRIVATE KEY-----\nCANARY" + rand.Text() + "\n-----END OPENSSH PRIVATE KEY-----\n"
		writeFile(t, filepath.Join(home, ".ssh", name), keys[name])
	}
	writeFile(t, filepath.Join(home, ".ssh", "config"), `Host web1
  HostName 10.0.0.1
  User deploy
  IdentityFile ~/.ssh/id_web1
Host web2 *.corp
  HostName 10.0.0.2
  IdentityFile %d/.ssh/id_web2
  IdentityFile ~/.ssh/id_web2_old
Host *
  ServerAliveInterval 30
Include `+filepath.Join(home, ".ssh", "conf.d", "*")+`
`)
	writeFile(t, filepath.Join(home, ".ssh", "conf.d", "more"), "Host agentbox\n  HostName 10.0.0.3\n  LocalCommand touch "+filepath.Join(root, "ran")+"\n")
	t.Cleanup(func() {
		for _, name := range []string{"web1-key", "web2-key", "agentbox-key"} {
			kr.Delete(context.Background(), name)
		}
	})
	return env, root, keys, kr
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// runBin runs the binary with stdin from a non-terminal.
func runBin(t *testing.T, env []string, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(actiongwBinary(t), args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return out.String(), errb.String(), err
}

// assertNoKeys fails t when text holds a byte of a key file beyond its
// PEM armour.
func assertNoKeys(t *testing.T, what, text string, keys map[string]string) {
	t.Helper()
	for name, k := range keys {
		if body := strings.Split(k, "\n")[1]; strings.Contains(text, body) {
			t.Errorf("%s holds the key of %s", what, name)
		}
	}
}

func TestImportSSHConfig(t *testing.T) {
	testenv.SecretService(t)
	env, root, keys, kr := importSetup(t)
	home := filepath.Join(root, "home")
	cfgPath := filepath.Join(root, "config", "actiongw", "config.toml")

	// Printed: stanzas on stdout, the key commands on stderr.
	out, errOut, err := runBin(t, env, "", "import", "ssh-config")
	if err != nil {
		t.Fatalf("import: %v\n%s", err, errOut)
	}
	for _, want := range []string{
		"[ssh.\"web1\"]\nhost = \"web1\"\nkey_secret = \"web1-key\"  # store the key with: actiongw secret set web1-key < " + filepath.Join(home, ".ssh", "id_web1"),
		"[ssh.\"web2\"]\nhost = \"web2\"\nkey_secret = \"web2-key\"",
		"# also IdentityFile " + filepath.Join(home, ".ssh", "id_web2_old"),
		"[ssh.\"agentbox\"]\nhost = \"agentbox\"\nagent = true",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout %q: want %q", out, want)
		}
	}
	if strings.Contains(out, "corp") || strings.Contains(out, "[ssh.\"*\"]") {
		t.Errorf("stdout %q: want no wildcard Host entry", out)
	}
	if want := "store the key of web1 with: actiongw secret set web1-key < " + filepath.Join(home, ".ssh", "id_web1"); !strings.Contains(errOut, want) {
		t.Errorf("stderr %q: want %q", errOut, want)
	}
	assertNoKeys(t, "the output", out+errOut, keys)
	if _, err := os.Stat(cfgPath); err == nil {
		t.Errorf("import without -write created %s", cfgPath)
	}

	// -hosts, -write: a new config, 0600, that loads (the aliases resolve).
	out, errOut, err = runBin(t, env, "", "import", "ssh-config", "-hosts", "web*", "-write")
	if err != nil || !strings.Contains(out, "added 2 ssh target(s) to "+cfgPath) {
		t.Fatalf("import -write: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	fi, err := os.Stat(cfgPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("written config: %v, %v; want mode 0600", fi, err)
	}
	written := readFile(t, cfgPath)
	assertNoKeys(t, "the written config", written, keys)
	if strings.Contains(written, "agentbox") {
		t.Errorf("config %q: want only web* hosts", written)
	}
	out, errOut, err = runBin(t, env, "", "secret", "list")
	if err != nil || !strings.Contains(out, "web1-key  missing") {
		t.Errorf("secret list of the written config: %v; want web1-key missing\nstdout: %s\nstderr: %s", err, out, errOut)
	}

	// Again: what is there is left alone, the rest appended.
	out, errOut, err = runBin(t, env, "", "import", "ssh-config", "-write")
	if err != nil || !strings.Contains(errOut, "[ssh.web1] is already in") || !strings.Contains(out, "added 1 ssh target(s)") {
		t.Errorf("second import -write: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	again := readFile(t, cfgPath)
	if !strings.HasPrefix(again, written) || strings.Count(again, "[ssh.\"web1\"]") != 1 || !strings.Contains(again, "[ssh.\"agentbox\"]") {
		t.Errorf("config after the second import:\n%s\nwant the first one, then agentbox only", again)
	}
	if _, _, err := runBin(t, env, "", "import", "ssh-config", "-write"); err == nil {
		t.Errorf("third import -write: got success; want nothing left to write as an error")
	}
	if readFile(t, cfgPath) != again {
		t.Errorf("a refused import changed the config")
	}
	if _, err := os.Stat(filepath.Join(root, "ran")); err == nil {
		t.Errorf("import ran the ssh config's LocalCommand")
	}
	if _, err := kr.Get(t.Context(), "web1-key"); err == nil {
		t.Errorf("import without a terminal stored a key; want only the command printed")
	}
}

// On a terminal, each key is offered: y stores the file's bytes as secret
// set would, anything else stores nothing.
func TestImportSSHConfigStoresKeys(t *testing.T) {
	testenv.SecretService(t)
	env, root, keys, kr := importSetup(t)
	master, slave := openPTY(t)
	cmd := exec.Command(actiongwBinary(t), "import", "ssh-config", "-write")
	cmd.Env = env
	screen := startOnPTY(t, cmd, master, slave)
	slave.Close()
	// The terminal keeps typed-ahead lines until the command reads them.
	if _, err := master.Write([]byte("y\rn\r")); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	got := string(<-screen)
	if err != nil {
		t.Fatalf("import at a terminal: %v\nscreen: %q", err, got)
	}
	for _, want := range []string{"store " + filepath.Join(root, "home", ".ssh", "id_web1") + " in the OS keyring as secret \"web1-key\"? [y/N]",
		"stored secret \"web1-key\"", "not stored; later: actiongw secret set web2-key"} {
		if !strings.Contains(got, want) {
			t.Errorf("screen %q: want %q", got, want)
		}
	}
	assertNoKeys(t, "the screen", got, keys)
	v, err := kr.Get(t.Context(), "web1-key")
	if err != nil || string(v.Reveal()) != keys["id_web1"] {
		t.Errorf("keyring web1-key: got %d bytes, %v; want the key file byte for byte", v.Len(), err)
	}
	if _, err := kr.Get(t.Context(), "web2-key"); err == nil {
		t.Errorf("keyring web2-key: stored after n; want not")
	}
	assertNoKeys(t, "the written config", readFile(t, filepath.Join(root, "config", "actiongw", "config.toml")), keys)
}

func TestImportUsage(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "want: import ssh-config"},
		{[]string{"hosts"}, "want: import ssh-config"},
		{[]string{"ssh-config", "extra"}, `unexpected argument "extra"`},
		{[]string{"ssh-config", "-hosts", "["}, "syntax error in pattern"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		cl := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
		err := cl.importCmd(t.Context(), c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("import %q: got %v; want an error containing %q", c.args, err, c.want)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
