package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"
	"golang.org/x/term"

	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/secrets"
)

const importUsage = `Usage:
  actiongw import ssh-config [-hosts PATTERN] [-ssh-config PATH] [-config PATH] [-write]

Makes an [ssh.NAME] target for each Host entry of the ssh config whose name
matches PATTERN (a glob; default every one; Host lines with only wildcards
are skipped). The target's host is the alias, so HostName, Port, User,
ProxyJump... are read from the ssh config when actiongw loads. An entry with
an IdentityFile gets key_secret = "NAME-key"; one without logs in with the
ssh-agent (agent = true).

Without -write, the stanzas are printed. With -write, they are appended to
the config (created 0600 if missing); a target that already exists there is
left as it is. No credential is ever written to the config: on a terminal,
each key file is offered for the keyring (y/N), as actiongw secret set does;
otherwise the command that stores it is printed.
`

// importCmd runs `actiongw import ssh-config`.
func (c *cli) importCmd(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "ssh-config" {
		if len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			fmt.Fprint(c.stdout, importUsage)
			return nil
		}
		fmt.Fprint(c.stderr, importUsage)
		return &usageError{"import: want: import ssh-config"}
	}
	fs := c.flags("import ssh-config", "import ssh-config [-hosts PATTERN] [-ssh-config PATH] [-config PATH] [-write]")
	pattern := fs.String("hosts", "*", "glob over the Host names to import")
	sshPath := fs.String("ssh-config", "", "the OpenSSH client config to read (default ~/.ssh/config)")
	configPath := configFlag(fs)
	write := fs.Bool("write", false, "append the targets to the config instead of printing them")
	if err := parse(fs, args[1:], 0); err != nil {
		return err
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	defaultSSH := filepath.Join(home, ".ssh", "config")
	if *sshPath == "" {
		*sshPath = defaultSSH
	}
	hosts, skipped, err := config.SSHConfigHosts(*sshPath, *pattern)
	if err != nil {
		return fmt.Errorf("import: ssh config %w", err)
	}
	for _, s := range skipped {
		fmt.Fprintf(c.stderr, "actiongw: import: skipped %s\n", s)
	}
	if len(hosts) == 0 {
		return fmt.Errorf("import: no Host entry of %s matches %q", *sshPath, *pattern)
	}

	out := c.stdout
	var target string
	if *write {
		target = *configPath
		if target == "" {
			target = config.DefaultPath(c.getenv)
		}
		existing, err := existingSSHTargets(target)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		kept := hosts[:0]
		for _, h := range hosts {
			if existing[h.Name] {
				fmt.Fprintf(c.stderr, "actiongw: import: [ssh.%s] is already in %s; left as it is\n", h.Name, target)
				continue
			}
			kept = append(kept, h)
		}
		if hosts = kept; len(hosts) == 0 {
			return fmt.Errorf("import: every chosen target is already in %s; nothing written", target)
		}
	}

	var stanzas bytes.Buffer
	for _, h := range hosts {
		writeStanza(&stanzas, h, *sshPath)
	}
	if *write {
		if err := appendConfig(target, stanzas.Bytes()); err != nil {
			return fmt.Errorf("import: %w", err)
		}
		fmt.Fprintf(out, "added %d ssh target(s) to %s\n", len(hosts), target)
	} else {
		out.Write(stanzas.Bytes())
		// The stanzas may be redirected into the config: what follows
		// goes to stderr.
		out = c.stderr
	}
	if *sshPath != defaultSSH {
		fmt.Fprintf(out, "the targets name Host aliases of %s: set ssh_config = %q in [server]\n", *sshPath, *sshPath)
	}
	if err := c.offerKeys(ctx, out, hosts); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	if *write {
		fmt.Fprintf(out, "then run: actiongw check -config %s\n", target)
	}
	return nil
}

// keySecretName is the keyring item an imported target's key goes in.
func keySecretName(target string) string { return target + "-key" }

// writeStanza writes h as an [ssh.NAME] table. Nothing in it is a
// credential: a key file is only named in a comment.
func writeStanza(w io.Writer, h config.SSHConfigHost, sshPath string) {
	fmt.Fprintf(w, "\n# Host %s of %s: HostName, Port, User, ProxyJump... are read from there.\n", h.Name, sshPath)
	fmt.Fprintf(w, "[ssh.%q]\nhost = %q\n", h.Name, h.Name)
	if len(h.IdentityFiles) == 0 {
		fmt.Fprintf(w, "agent = true  # the entry has no IdentityFile: log in with the ssh-agent's keys\n")
		return
	}
	fmt.Fprintf(w, "key_secret = %q  # store the key with: actiongw secret set %s < %s\n",
		keySecretName(h.Name), keySecretName(h.Name), h.IdentityFiles[0])
	for _, f := range h.IdentityFiles[1:] {
		fmt.Fprintf(w, "# also IdentityFile %s: one key per target; store another one instead if that is the right one\n", f)
	}
}

// existingSSHTargets returns the [ssh.*] names of the config at path;
// none when it does not exist. A config that does not decode is an error:
// appending to it would not fix it.
func existingSSHTargets(path string) (map[string]bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var doc struct {
		SSH map[string]toml.Primitive `toml:"ssh"`
	}
	if _, err := toml.Decode(string(data), &doc); err != nil {
		return nil, fmt.Errorf("%s does not decode (%v); fix it first", path, err)
	}
	names := map[string]bool{}
	for name := range doc.SSH {
		names[name] = true
	}
	return names, nil
}

// appendConfig appends stanzas to the config at path, creating it 0600
// (and its directory 0700) when missing.
func appendConfig(path string, stanzas []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(stanzas)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// offerKeys offers each imported target's key file for the keyring: on a
// terminal it asks y/N per key and stores it as `actiongw secret set`
// does; otherwise it prints the commands.
func (c *cli) offerKeys(ctx context.Context, out io.Writer, hosts []config.SSHConfigHost) error {
	f, tty := c.stdin.(*os.File)
	tty = tty && term.IsTerminal(int(f.Fd()))
	var answers *bufio.Reader
	if tty {
		answers = bufio.NewReader(c.stdin)
	}
	for _, h := range hosts {
		if len(h.IdentityFiles) == 0 {
			continue
		}
		name, file := keySecretName(h.Name), h.IdentityFiles[0]
		if !tty {
			fmt.Fprintf(out, "store the key of %s with: actiongw secret set %s < %s\n", h.Name, name, file)
			continue
		}
		fmt.Fprintf(c.stderr, "store %s in the OS keyring as secret %q? [y/N] ", file, name)
		line, err := answers.ReadString('\n')
		if err != nil && line == "" {
			return fmt.Errorf("reading the answer: %w", err)
		}
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			fmt.Fprintf(out, "not stored; later: actiongw secret set %s < %s\n", name, file)
			continue
		}
		value, err := readKeyFile(file)
		if err == nil {
			err = c.storeSecret(ctx, out, name, value)
			clear(value)
		}
		if err != nil {
			return fmt.Errorf("secret %s: %w", name, err)
		}
	}
	return nil
}

// readKeyFile reads a key file, at most the largest secret.
func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, secrets.MaxValueBytes+1))
	if err == nil && len(b) > secrets.MaxValueBytes {
		clear(b)
		return nil, fmt.Errorf("%s holds more than %d bytes, the largest secret", path, secrets.MaxValueBytes)
	}
	return b, err
}
