package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"golang.org/x/term"

	"github.com/actiongw/actiongw/internal/redact"
	"github.com/actiongw/actiongw/secrets"
)

const secretUsage = `Usage:
  actiongw secret set NAME             store a secret: typed at a prompt that does not
                                       echo, or read from stdin when stdin is not a terminal
  actiongw secret delete NAME          remove a secret
  actiongw secret list [-config PATH]  the secrets the config names, and which are stored

Secrets live in the OS keyring under the service "actiongw"; no command prints
a value. From stdin, one trailing newline is dropped from a one-line value (a
token); a multi-line value (a key file) is stored byte for byte.

Examples:
  actiongw secret set web1-deploy-key < ~/.ssh/id_ed25519
  actiongw secret set github-token
`

// secret runs `actiongw secret set|delete|list`.
func (c *cli) secret(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(c.stderr, secretUsage)
		return &usageError{"secret: no subcommand given"}
	}
	switch args[0] {
	case "set":
		return c.secretSet(ctx, args[1:])
	case "delete":
		return c.secretDelete(ctx, args[1:])
	case "list":
		return c.secretList(ctx, args[1:])
	case "help", "-h", "-help", "--help":
		fmt.Fprint(c.stdout, secretUsage)
		return nil
	}
	return &usageError{fmt.Sprintf("secret: unknown subcommand %q (want set, delete or list)", args[0])}
}

func (c *cli) secretSet(ctx context.Context, args []string) error {
	name, err := c.secretName("set", args)
	if err != nil {
		return err
	}
	// Fail before the person types the value, not after.
	if err := c.keyring().Ping(ctx); err != nil {
		return fmt.Errorf("secret set: %w", err)
	}
	value, err := c.readSecret(name)
	if err != nil {
		return fmt.Errorf("secret set: %w", err)
	}
	defer clear(value)
	if err := c.storeSecret(ctx, c.stdout, name, value); err != nil {
		return fmt.Errorf("secret set: %w", err)
	}
	return nil
}

// storeSecret stores value in the keyring under name and says so on out:
// what secret set does once it has the value, and import ssh-config with a
// key file.
func (c *cli) storeSecret(ctx context.Context, out io.Writer, name string, value []byte) error {
	if len(value) < redact.MinSecretLen {
		// It could not be redacted from output without mangling it.
		return &redact.ShortSecretError{Name: name}
	}
	if err := c.keyring().Set(ctx, name, value); err != nil {
		return err
	}
	fmt.Fprintf(out, "stored secret %q (%d bytes) in the OS keyring\n", name, len(value))
	return nil
}

func (c *cli) secretDelete(ctx context.Context, args []string) error {
	name, err := c.secretName("delete", args)
	if err != nil {
		return err
	}
	err = c.keyring().Delete(ctx, name)
	var nf *secrets.NotFoundError
	if errors.As(err, &nf) {
		return fmt.Errorf("secret delete: there is no secret %q in the keyring", name)
	}
	if err != nil {
		return fmt.Errorf("secret delete: %w", err)
	}
	fmt.Fprintf(c.stdout, "deleted secret %q from the OS keyring\n", name)
	return nil
}

func (c *cli) secretList(ctx context.Context, args []string) error {
	fs := c.flags("secret list", "secret list [-config PATH]")
	cfg, err := c.parseConfig(fs, args)
	if err != nil {
		return err
	}
	names := cfg.SecretNames()
	if len(names) == 0 {
		fmt.Fprintln(c.stdout, "the config names no secrets")
		return nil
	}
	problems, err := lookupSecrets(ctx, c.keyring(), names)
	if err != nil {
		return fmt.Errorf("secret list: %w", err)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS")
	bad := 0
	for _, name := range names {
		status := "stored"
		var short *redact.ShortSecretError
		switch err := problems[name]; {
		case errors.As(err, &short):
			status, bad = fmt.Sprintf("too short (at least %d bytes)", redact.MinSecretLen), bad+1
		case err != nil:
			status, bad = "missing", bad+1
		}
		fmt.Fprintf(tw, "%s\t%s\n", name, status)
	}
	tw.Flush()
	if bad > 0 {
		fmt.Fprintln(c.stdout, "store a missing or too short secret with: actiongw secret set NAME")
	}
	return nil
}

// keyring is the OS keyring under actiongw's service name, or under
// $ACTIONGW_KEYRING_SERVICE when set (tests use their own).
func (c *cli) keyring() *secrets.Keyring {
	return &secrets.Keyring{Service: c.getenv("ACTIONGW_KEYRING_SERVICE")}
}

// lookupSecrets reports what is wrong with each of names in the keyring:
// nothing (nil), not there (*secrets.NotFoundError), or too short to
// redact (*redact.ShortSecretError). An error is about the keyring as a
// whole (no Secret Service, a locked keyring): it ends the lookup, since
// every other name would fail the same way.
func lookupSecrets(ctx context.Context, kr *secrets.Keyring, names []string) (map[string]error, error) {
	problems := make(map[string]error, len(names))
	for _, name := range names {
		v, err := kr.Get(ctx, name)
		var nf *secrets.NotFoundError
		switch {
		case errors.As(err, &nf):
			problems[name] = err
		case err != nil:
			return nil, err
		case v.Len() < redact.MinSecretLen:
			problems[name] = &redact.ShortSecretError{Name: name}
		default:
			problems[name] = nil
		}
	}
	return problems, nil
}

// secretName parses the arguments of set and delete: exactly one NAME.
func (c *cli) secretName(sub string, args []string) (string, error) {
	fs := c.flags("secret "+sub, "secret "+sub+" NAME")
	if err := parse(fs, args, 1); err != nil {
		return "", err
	}
	if fs.NArg() != 1 {
		return "", &usageError{fmt.Sprintf("secret %s: want a NAME", sub)}
	}
	name := fs.Arg(0)
	if err := secrets.CheckUserName(name); err != nil {
		return "", &usageError{fmt.Sprintf("secret %s: %v", sub, err)}
	}
	return name, nil
}

// readSecret reads a value from a terminal without echo, or else all of
// stdin.
func (c *cli) readSecret(name string) ([]byte, error) {
	if f, ok := c.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(c.stderr, "value for secret %q (typing is not shown): ", name)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(c.stderr)
		if err != nil {
			return nil, fmt.Errorf("reading the value from the terminal: %w", err)
		}
		return b, nil
	}
	b, err := io.ReadAll(io.LimitReader(c.stdin, secrets.MaxValueBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the value from stdin: %w", err)
	}
	if len(b) > secrets.MaxValueBytes {
		clear(b)
		return nil, fmt.Errorf("stdin holds more than %d bytes, the largest secret", secrets.MaxValueBytes)
	}
	return trimNewline(b), nil
}

// trimNewline drops the one newline (LF or CRLF) that echo and editors put
// after a one-line value, such as a token. A multi-line value, such as a PEM
// key whose format ends in a newline, is kept byte for byte.
func trimNewline(b []byte) []byte {
	line, ok := bytes.CutSuffix(b, []byte("\n"))
	if !ok {
		return b
	}
	line = bytes.TrimSuffix(line, []byte("\r"))
	if bytes.ContainsAny(line, "\n") {
		return b
	}
	return line
}
