package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/redact"
	"github.com/actiongw/actiongw/internal/zxcvbn"
	"github.com/actiongw/actiongw/secrets"
)

const secretUsage = `Usage:
  actiongw secret set [-config PATH] NAME
                                       store a secret: typed at a prompt that does not
                                       echo, or read from stdin when stdin is not a terminal
  actiongw secret delete NAME          remove a secret
  actiongw secret list [-config PATH]  the secrets the config names, and which are stored

Secrets live in the OS keyring under the service "actiongw"; no command prints
a value. From stdin, one trailing newline is dropped from a one-line value (a
token); a multi-line value (a key file) is stored byte for byte.

set warns when the value could be found by guessing (under 2^60 guesses, as
zxcvbn estimates): an agent that can run commands can try guesses and see which
come back redacted. It judges a value the config (-config, else the default
lookup) uses as a password, passphrase, token or client secret, and a value no
config names unless it holds a PEM block (a key); it skips one the config uses
only as a private key or certificate. zxcvbn counts a random character as about
3.3 bits, so a random value needs some 20 characters or more.

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
	fs := c.flags("secret set", "secret set [-config PATH] NAME")
	configPath := configFlag(fs)
	name, err := c.secretName(fs, "set", args)
	if err != nil {
		return err
	}
	// Fail before the person types the value, not after: a config asked
	// for that does not load, a keyring that cannot be reached.
	fields, known, err := c.secretFields(*configPath, name)
	if err != nil {
		return err
	}
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
	// The config knows what the item is for; without it, a PEM block is a
	// key (or a certificate) and anything else may be a password or a
	// token: judged, since a warning too many costs less than a weak
	// password nobody was told about.
	judge := len(fields) > 0 || (!known && !holdsPEM(value))
	if judge && weak(value) {
		fmt.Fprintf(c.stderr, "actiongw: warning: %v\n", &weakSecretError{Name: name, Fields: fields})
	}
	return nil
}

// secretFields returns the fields of the config that use the keyring item
// name for a guessable value (config.GuessableSecrets), and whether the
// config names it at all. The config is the one -config names, which must
// load, else the default lookup's, when one loads there.
func (c *cli) secretFields(path, name string) (fields []string, named bool, err error) {
	var cfg *config.Config
	if path != "" {
		if cfg, err = c.loadConfig(path); err != nil {
			return nil, false, err
		}
	} else if cfg, err = config.Load(config.DefaultPath(c.getenv)); err != nil {
		return nil, false, nil // none there, or not one that loads: the value alone is judged
	}
	return cfg.GuessableSecrets()[name], slices.Contains(cfg.SecretNames(), name), nil
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
	name, err := c.secretName(c.flags("secret delete", "secret delete NAME"), "delete", args)
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
	problems, err := lookupSecrets(ctx, c.keyring(), names, nil)
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
// nothing (nil), not there (*secrets.NotFoundError), too short to redact
// (*redact.ShortSecretError), or, for a name that guessable maps to the
// fields using it (config.GuessableSecrets), weak (*weakSecretError). An
// error is about the keyring as a whole (no Secret Service, a locked
// keyring): it ends the lookup, since every other name would fail the
// same way.
func lookupSecrets(ctx context.Context, kr *secrets.Keyring, names []string, guessable map[string][]string) (map[string]error, error) {
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
		case len(guessable[name]) > 0 && weak(v.Reveal()):
			problems[name] = &weakSecretError{Name: name, Fields: guessable[name]}
		default:
			problems[name] = nil
		}
	}
	return problems, nil
}

// minGuessBits is the strength below which a secret counts as one an
// agent could find by trying: 2^60 guesses.
const minGuessBits = 60

// maxJudgedRunes bounds the part of a value the estimator reads. zxcvbn's
// matchers grow faster than the square of the length (1,000 characters
// take tens of seconds, 100 about a tenth of one), and its authors
// suggest judging the first 100. What follows is not counted, so a long
// value is judged by its start: a weak start in a long value that is
// strong is a warning too many, never one too few for a short value.
const maxJudgedRunes = 100

// weak reports whether value could be found in under 2^minGuessBits
// guesses, as zxcvbn estimates them (internal/zxcvbn, a copy of
// github.com/trustelem/zxcvbn that builds its tables on the first
// estimate, which serve never makes): it
// knows what guessing tries first (common passwords, words, names, dates,
// keyboard walks, repeats, sequences, l33t), which counting characters
// does not. The estimator takes a string, so the value is copied into
// memory that cannot be cleared, as any use of it (a request, a redactor)
// does.
func weak(value []byte) bool {
	var s strings.Builder
	for i, n := 0, 0; i < len(value) && n < maxJudgedRunes; n++ {
		r, size := utf8.DecodeRune(value[i:])
		if r == utf8.RuneError && size == 1 {
			r = rune(value[i]) // a byte of a binary value: one of 256, as Latin-1 counts it
		}
		s.WriteRune(r)
		i += size
	}
	guesses := zxcvbn.PasswordStrength(s.String(), nil).Guesses
	return math.Log2(guesses) < minGuessBits
}

// holdsPEM reports whether value holds a PEM armor line, as a private
// key (or a certificate) does, which no one guesses. The line is enough:
// a key that does not parse is check's to report, not a password.
func holdsPEM(value []byte) bool {
	return bytes.Contains(value, []byte("-----BEGIN "))
}

// weakSecretError is a secret that could be found by guessing. It names
// the keyring item and the fields that use it, and never holds the value
// nor anything computed from it.
type weakSecretError struct {
	Name string
	// Fields are the config fields that use it; empty when no config
	// names it.
	Fields []string
}

func (e *weakSecretError) Error() string {
	use := "no config names it; if it is a password, a passphrase, a token or a client secret, it"
	if len(e.Fields) > 0 {
		use = "used as " + strings.Join(e.Fields, ", ") + ", it"
	}
	return fmt.Sprintf("secret %q is weak: %s could be found by trying (under 2^%d guesses, as zxcvbn estimates): an agent that can run commands can try guesses and see whether they come back redacted, and each right guess is only an audit event; change it to a longer random value (openssl rand -base64 32) where it is issued, then store it with: actiongw secret set %s",
		e.Name, use, minGuessBits, e.Name)
}

// secretName parses the arguments of set and delete into fs: exactly one
// NAME.
func (c *cli) secretName(fs *flag.FlagSet, sub string, args []string) (string, error) {
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
