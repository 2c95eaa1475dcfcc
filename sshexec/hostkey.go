package sshexec

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"
)

// HostKeyError reports a host key that could not be verified: unknown,
// changed, revoked, or not the pinned one. Its message shows the presented
// fingerprint and says how to trust the key.
type HostKeyError struct {
	Target string // the target's name
	Host   string // host:port whose key was checked
	// KeyType and Fingerprint describe the key the server presented.
	KeyType, Fingerprint string
	// Known is true when known_hosts records other keys for the host (the
	// key changed), false when it records none (the host is unknown).
	Known bool
	// Revoked is true when the key is marked @revoked.
	Revoked bool
	// Pinned is the configured host_key fingerprint, when the check was
	// against a pin rather than known_hosts.
	Pinned string
	// KnownHosts is the known_hosts file that was consulted.
	KnownHosts string
	// Line is the known_hosts line that would trust the presented key.
	Line string
}

func (e *HostKeyError) Error() string {
	presented := fmt.Sprintf("%s presented %s key %s", e.Host, e.KeyType, e.Fingerprint)
	switch {
	case e.Revoked:
		return fmt.Sprintf("host key of target %q is revoked: %s, marked @revoked in %s; refusing to connect",
			e.Target, presented, e.KnownHosts)
	case e.Pinned != "":
		return fmt.Sprintf("host key of target %q does not match the pinned host_key %s: %s; "+
			"if the host's administrator confirms this key, set host_key = %q",
			e.Target, e.Pinned, presented, e.Fingerprint)
	case e.Known:
		return fmt.Sprintf("host key of target %q changed: %s, which is not the key recorded in %s "+
			"(the host was reinstalled, or someone is intercepting the connection); "+
			"if the host's administrator confirms this key, replace the host's lines in %s with %q, or set host_key = %q",
			e.Target, presented, e.KnownHosts, e.KnownHosts, e.Line, e.Fingerprint)
	default:
		return fmt.Sprintf("host key of target %q is unknown: %s, and %s has no entry for it; "+
			"after checking the fingerprint with the host's administrator (ssh-keygen -lf on the host's public key), "+
			"add the line %q to %s, or set host_key = %q",
			e.Target, presented, e.KnownHosts, e.Line, e.KnownHosts, e.Fingerprint)
	}
}

// Unknown reports whether the host presented a key while known_hosts
// records none for it: not a changed or revoked key, nor a pin's
// mismatch. Only such a key may be trusted on a person's word
// (TrustHostKey).
func (e *HostKeyError) Unknown() bool { return !e.Known && !e.Revoked && e.Pinned == "" }

// trustMu serializes appends to known_hosts files within the process.
var trustMu sync.Mutex

// TrustHostKey records the key an Unknown error presented: it appends
// e.Line to e.KnownHosts, creating the file (0600) and its directory
// (0700) when missing, unless the file already has the line. The next
// connection then verifies that exact key; any other is a changed key.
func TrustHostKey(e *HostKeyError) error {
	if !e.Unknown() || e.KnownHosts == "" || e.Line == "" {
		return fmt.Errorf("host key of target %q: only an unknown key can be trusted", e.Target)
	}
	trustMu.Lock()
	defer trustMu.Unlock()
	if err := os.MkdirAll(filepath.Dir(e.KnownHosts), 0o700); err != nil {
		return fmt.Errorf("trust host key of target %q: %w", e.Target, err)
	}
	f, err := os.OpenFile(e.KnownHosts, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("trust host key of target %q: %w", e.Target, err)
	}
	defer f.Close()
	have, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("trust host key of target %q: read %s: %w", e.Target, e.KnownHosts, err)
	}
	if slices.Contains(strings.Split(string(have), "\n"), e.Line) {
		return nil
	}
	line := e.Line + "\n"
	if len(have) > 0 && have[len(have)-1] != '\n' {
		line = "\n" + line
	}
	if _, err := f.WriteString(line); err != nil {
		return fmt.Errorf("trust host key of target %q: write %s: %w", e.Target, e.KnownHosts, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("trust host key of target %q: write %s: %w", e.Target, e.KnownHosts, err)
	}
	return nil
}

// openSSHHostKeyOrder is OpenSSH's preference order. It is used when nothing
// is recorded for the host (or a fingerprint is pinned), so that the key a
// person is shown is the one `ssh` would show on first contact.
var openSSHHostKeyOrder = []string{
	ssh.KeyAlgoED25519,
	ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
	ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256,
}

// hostKeyCheck verifies one hop's host key. It keeps the error of the
// callback, which the handshake would otherwise wrap in its own text.
type hostKeyCheck struct {
	callback ssh.HostKeyCallback
	algos    []string
	err      *HostKeyError
	// recorded is true when a key is pinned or known_hosts records one
	// for the host: the check has a key to compare with.
	recorded bool
}

func newHostKeyCheck(t *Target) (*hostKeyCheck, error) {
	addr := t.addr()
	// The name the key is recorded under: the alias, with no port, as
	// OpenSSH looks it up (known_hosts drops port 22).
	lookup := addr
	if t.HostKeyAlias != "" {
		lookup = net.JoinHostPort(t.HostKeyAlias, "22")
	}
	hk := &hostKeyCheck{}
	if t.HostKey != "" {
		pin := strings.TrimRight(t.HostKey, "=")
		hk.algos, hk.recorded = openSSHHostKeyOrder, true
		hk.callback = func(_ string, _ net.Addr, key ssh.PublicKey) error {
			if ssh.FingerprintSHA256(key) == pin {
				return nil
			}
			hk.err = &HostKeyError{Target: t.Name, Host: addr, KeyType: key.Type(),
				Fingerprint: ssh.FingerprintSHA256(key), Pinned: t.HostKey}
			return hk.err
		}
		return hk, nil
	}

	path := t.KnownHostsPath
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("target %q: default known_hosts: %w", t.Name, err)
		}
		path = filepath.Join(home, ".ssh", "known_hosts")
	} else if rest, ok := strings.CutPrefix(path, "~/"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("target %q: known_hosts %s: %w", t.Name, path, err)
		}
		path = filepath.Join(home, rest)
	}

	// A missing file means "nothing is known", which is reported with the
	// presented key, as for any unknown host.
	check := func(string, net.Addr, ssh.PublicKey) error { return &xknownhosts.KeyError{} }
	db, err := knownhosts.NewDB(path)
	switch {
	case err == nil:
		check = db.HostKeyCallback()
		// Offer only the algorithms of the recorded keys: otherwise the
		// server may present a key type that is not recorded, which
		// knownhosts reports as a changed key.
		hk.algos = db.HostKeyAlgorithms(lookup)
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, fmt.Errorf("target %q: read known_hosts: %w", t.Name, err)
	}
	hk.recorded = len(hk.algos) > 0
	if !hk.recorded {
		hk.algos = openSSHHostKeyOrder
	}
	hk.callback = func(_ string, remote net.Addr, key ssh.PublicKey) error {
		err := check(lookup, remote, key)
		if err == nil {
			return nil
		}
		e := &HostKeyError{Target: t.Name, Host: addr, KeyType: key.Type(),
			Fingerprint: ssh.FingerprintSHA256(key), KnownHosts: path,
			Line: knownhosts.Line([]string{lookup}, key)}
		var revoked *xknownhosts.RevokedError
		var keyErr *xknownhosts.KeyError
		switch {
		case errors.As(err, &revoked):
			e.Revoked = true
		case errors.As(err, &keyErr):
			e.Known = len(keyErr.Want) > 0
		default:
			return fmt.Errorf("check host key of target %q: %w", t.Name, err)
		}
		hk.err = e
		return e
	}
	return hk, nil
}
