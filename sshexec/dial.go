package sshexec

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// AuthError reports that the server accepted none of the target's
// credentials, or that there were none to offer: an ssh-agent without keys.
type AuthError struct {
	Target, User string
	Methods      []string // the methods that were offered: publickey, password
	// KeyFingerprint is the SHA256 fingerprint of the configured private
	// key; empty when there is none.
	KeyFingerprint string
	// KeySecret and PasswordSecret name the keyring items that were tried.
	KeySecret, PasswordSecret string
	// Agent is the ssh-agent's socket ($SSH_AUTH_SOCK) when agent = true;
	// AgentKeys the number of keys it offered.
	Agent     string
	AgentKeys int
	// agentListed is true once the agent's keys were asked for: the
	// server may refuse before publickey is tried.
	agentListed bool
	// cert is the target's certificate, nil when it has none; certOffered
	// is false when the agent held no key for it.
	cert        *ssh.Certificate
	certOffered bool
	// caSecret is the keyring item of the CA that signed cert, when the
	// gateway signed it (a CA target).
	caSecret string
	// ServerVersion is the identification line the server announced
	// ("SSH-2.0-OpenSSH_9.2p1 Debian-2"); the server's text, untrusted.
	ServerVersion string
}

func (e *AuthError) Error() string {
	if e.agentListed && e.AgentKeys == 0 && e.KeyFingerprint == "" && !slices.Contains(e.Methods, "password") {
		return fmt.Sprintf("target %q: the ssh-agent at SSH_AUTH_SOCK=%s holds no keys, so there was nothing to log in with; "+
			"add the key with: ssh-add ~/.ssh/id_ed25519 (ssh-add -l lists what the agent holds)", e.Target, e.Agent)
	}
	if e.caSecret != "" {
		return e.caRefused()
	}
	var tried, hints []string
	if e.cert != nil {
		cert, hint := certRefused(e.cert, e.User, e.certOffered)
		if cert != "" {
			tried = append(tried, cert)
		}
		hints = append(hints, hint)
	}
	if e.KeyFingerprint != "" {
		k := "key " + e.KeyFingerprint
		if e.KeySecret != "" {
			k += fmt.Sprintf(" (keyring item %q)", e.KeySecret)
		}
		tried = append(tried, k)
	}
	if e.Agent != "" {
		tried = append(tried, fmt.Sprintf("%d key%s from the ssh-agent (ssh-add -l lists them)", e.AgentKeys, plural(e.AgentKeys)))
	}
	if len(tried) > 0 {
		hints = append(hints, "check that the public key is in ~/.ssh/authorized_keys of that user on the host (ssh-keygen -lf shows a key's fingerprint)")
	}
	if slices.Contains(e.Methods, "password") {
		if e.PasswordSecret != "" {
			tried = append(tried, fmt.Sprintf("the password in keyring item %q", e.PasswordSecret))
			hints = append(hints, "check the password, and store the right one with: actiongw secret set "+e.PasswordSecret)
		} else {
			tried = append(tried, "the password")
			hints = append(hints, "check the password")
		}
	}
	if len(tried) == 0 {
		tried = append(tried, "no credential")
	}
	return fmt.Sprintf("target %q: server refused login as %q with %s: %s",
		e.Target, e.User, strings.Join(tried, " and "), strings.Join(hints, "; "))
}

// caRefused is the error of a login with a certificate the gateway
// signed: what the host must have for sshd to accept it, and whether the
// sshd version it announced can.
func (e *AuthError) caRefused() string {
	ca := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(e.cert.SignatureKey)))
	version, tooOld := caVersionAdvice(e.ServerVersion)
	refused := fmt.Sprintf("target %q: server refused login as %q with a certificate of the CA in keyring item %q (%s, principal %q): ",
		e.Target, e.User, e.caSecret, ssh.FingerprintSHA256(e.cert.SignatureKey), e.User)
	fix := fmt.Sprintf("on the host, put the CA's line %q in the file sshd_config's TrustedUserCAKeys names (actiongw ca init printed it) and reload sshd; "+
		"when AuthorizedPrincipalsFile is set, the file for %s must list %q",
		ca, e.User, e.User)
	log := fmt.Sprintf("its log (LogLevel VERBOSE) says why it refused, under the key id %q", e.cert.KeyId)
	if tooOld {
		return refused + version + "; then " + fix + "; " + log
	}
	return refused + fix + "; " + version + "; " + log
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// KeyProblem is what is wrong with a private key.
type KeyProblem int

const (
	// KeyNotAKey: the bytes are no OpenSSH or PEM private key (a token, a
	// public key, a truncated file).
	KeyNotAKey KeyProblem = iota + 1
	// KeyNeedsPassphrase: the key is encrypted and no passphrase is set.
	KeyNeedsPassphrase
	// KeyWrongPassphrase: the passphrase does not decrypt the key.
	KeyWrongPassphrase
)

// KeyError reports a private key that cannot be used. It names the
// keyring items, never their bytes.
type KeyError struct {
	Target string
	// Secret and PassphraseSecret are Auth.KeySecret and
	// Auth.PassphraseSecret; empty when the caller gave no names.
	Secret, PassphraseSecret string
	Problem                  KeyProblem
	// PublicKey is true when the bytes are a public key (KeyNotAKey).
	PublicKey bool
	// Err is x/crypto's parse error for KeyNotAKey; it describes the
	// format, never the bytes.
	Err error
}

func (e *KeyError) Error() string {
	item, fix := "the private key", "actiongw secret set NAME < ~/.ssh/id_ed25519"
	if e.Secret != "" {
		item = fmt.Sprintf("keyring item %q (key_secret)", e.Secret)
		fix = fmt.Sprintf("actiongw secret set %s < ~/.ssh/id_ed25519", e.Secret)
	}
	switch e.Problem {
	case KeyNeedsPassphrase:
		name := "NAME"
		if e.Secret != "" {
			name = e.Secret + "-passphrase"
		}
		return fmt.Sprintf("target %q: %s is an encrypted private key and no passphrase_secret is set; "+
			"store the passphrase with: actiongw secret set %s, and add passphrase_secret = %q to the target",
			e.Target, item, name, name)
	case KeyWrongPassphrase:
		pass, fixPass := "the passphrase", "store the right one"
		if e.PassphraseSecret != "" {
			pass = fmt.Sprintf("keyring item %q (passphrase_secret)", e.PassphraseSecret)
			fixPass = "store the right passphrase with: actiongw secret set " + e.PassphraseSecret
		}
		return fmt.Sprintf("target %q: %s does not decrypt %s; %s", e.Target, pass, item, fixPass)
	}
	what := "is not an OpenSSH or PEM private key"
	if e.PublicKey {
		what = "holds a public key, not the private key"
	} else if e.Err != nil {
		what += " (" + e.Err.Error() + ")"
	}
	return fmt.Sprintf("target %q: %s %s; store the private key file (the one without .pub) with: %s",
		e.Target, item, what, fix)
}

func (e *KeyError) Unwrap() error { return e.Err }

// signer parses t's private key; its errors are *KeyError.
func (t *Target) signer() (ssh.Signer, error) {
	a := &t.Auth
	var signer ssh.Signer
	var err error
	if len(a.Passphrase) > 0 {
		signer, err = ssh.ParsePrivateKeyWithPassphrase(a.PrivateKey, a.Passphrase)
	} else {
		signer, err = ssh.ParsePrivateKey(a.PrivateKey)
	}
	if err == nil {
		return signer, nil
	}
	e := &KeyError{Target: t.Name, Secret: a.KeySecret, PassphraseSecret: a.PassphraseSecret}
	var missing *ssh.PassphraseMissingError
	switch {
	case errors.As(err, &missing):
		e.Problem = KeyNeedsPassphrase
	case errors.Is(err, x509.IncorrectPasswordError):
		e.Problem = KeyWrongPassphrase
	default:
		e.Problem, e.Err = KeyNotAKey, err
		_, _, _, _, perr := ssh.ParseAuthorizedKey(a.PrivateKey)
		e.PublicKey = perr == nil
	}
	return nil, e
}

// clientVersion is sent in the SSH banner so that server logs show the tool.
const clientVersion = "SSH-2.0-actiongw"

// authMethods builds the client's auth methods from the target's credential
// bytes, and the *AuthError to return if the server accepts none, which
// the methods fill in as they run. The returned closer ends the agent
// connection, which is only needed during the handshake.
func authMethods(t *Target) ([]ssh.AuthMethod, *AuthError, func(), error) {
	var signers []ssh.Signer
	closer := func() {}
	ae := &AuthError{Target: t.Name, User: t.User, KeySecret: t.Auth.KeySecret, PasswordSecret: t.Auth.PasswordSecret}
	if len(t.Auth.PrivateKey) > 0 {
		signer, err := t.signer()
		if err != nil {
			return nil, nil, closer, err
		}
		signers = append(signers, signer)
		ae.KeyFingerprint = ssh.FingerprintSHA256(signer.PublicKey())
	}
	// The certificate is offered before the plain key, as OpenSSH does:
	// a server that does not trust its CA may still list the key.
	cert, err := t.certificate(firstKey(signers), time.Now())
	if err != nil {
		return nil, nil, closer, err
	}
	ae.cert = cert
	if cert != nil && len(signers) > 0 {
		cs, err := certSigner(cert, signers)
		if err != nil {
			return nil, nil, closer, fmt.Errorf("target %q: certificate: %w", t.Name, err)
		}
		signers, ae.certOffered = append([]ssh.Signer{cs}, signers...), true
	}
	var agentSigners func() ([]ssh.Signer, error)
	if t.Auth.Agent {
		sock := os.Getenv("SSH_AUTH_SOCK")
		if t.AgentSocket != "" {
			sock = t.AgentSocket
		}
		if sock == "" {
			return nil, nil, closer, fmt.Errorf("target %q: agent = true but SSH_AUTH_SOCK is not set in actiongw's environment: "+
				"start an ssh-agent and ssh-add the key, then start actiongw where SSH_AUTH_SOCK is set "+
				"(an MCP client starts actiongw with its own environment: add SSH_AUTH_SOCK to the client's server entry)", t.Name)
		}
		conn, err := net.Dial("unix", sock)
		if err != nil {
			return nil, nil, closer, fmt.Errorf("target %q: cannot reach the ssh-agent at SSH_AUTH_SOCK=%s (%w): "+
				"the agent is not running or the socket is stale; start one (eval $(ssh-agent)), ssh-add the key and restart actiongw with its SSH_AUTH_SOCK",
				t.Name, sock, errors.Unwrap(err))
		}
		closer = func() { conn.Close() }
		agentSigners = agent.NewClient(conn).Signers
		ae.Agent = sock
	}

	var methods []ssh.AuthMethod
	if len(signers) > 0 || agentSigners != nil {
		// One publickey method: x/crypto tries each method name only once.
		methods = append(methods, ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
			if agentSigners == nil {
				return signers, nil
			}
			more, err := agentSigners()
			if err != nil {
				return nil, fmt.Errorf("list ssh-agent keys: %w", err)
			}
			ae.AgentKeys, ae.agentListed = len(more), true
			if cert != nil && !ae.certOffered {
				cs, err := certSigner(cert, more)
				if err != nil {
					return nil, fmt.Errorf("certificate with an ssh-agent key: %w", err)
				}
				if cs != nil {
					more, ae.certOffered = append([]ssh.Signer{cs}, more...), true
				}
			}
			return append(signers, more...), nil
		}))
		ae.Methods = append(ae.Methods, "publickey")
	}
	if pw := t.Auth.Password; len(pw) > 0 {
		methods = append(methods,
			ssh.PasswordCallback(func() (string, error) { return string(pw), nil }),
			// Servers with PasswordAuthentication off often ask for the
			// password through keyboard-interactive.
			ssh.KeyboardInteractive(func(_, _ string, questions []string, echos []bool) ([]string, error) {
				answers := make([]string, len(questions))
				if len(questions) == 1 && !echos[0] {
					answers[0] = string(pw)
				}
				return answers, nil
			}))
		ae.Methods = append(ae.Methods, "password")
	}
	return methods, ae, closer, nil
}

// certAuth is authMethods for a certificate of t's CA.
func certAuth(t *Target, cert ssh.Signer) ([]ssh.AuthMethod, *AuthError, func(), error) {
	c := cert.PublicKey().(*ssh.Certificate)
	ae := &AuthError{Target: t.Name, User: t.User, Methods: []string{"publickey"}, cert: c, certOffered: true, caSecret: t.Auth.CASecret}
	return []ssh.AuthMethod{ssh.PublicKeys(cert)}, ae, func() {}, nil
}

// handshake runs the SSH handshake for t over conn, which it closes on
// failure, logging in with cert when it is not nil (see dialAs). ctx
// bounds the whole handshake: when it ends, conn is closed and the
// handshake fails at once.
func handshake(ctx context.Context, t *Target, conn net.Conn, cert ssh.Signer) (*ssh.Client, error) {
	hk, err := newHostKeyCheck(t)
	if err != nil {
		conn.Close()
		return nil, err
	}
	auth, authErr, closeAgent, err := authMethods(t)
	if cert != nil {
		auth, authErr, closeAgent, err = certAuth(t, cert)
	}
	defer closeAgent()
	if err != nil {
		conn.Close()
		return nil, err
	}
	return clientConn(ctx, t, conn, hk, auth, authErr)
}

// errProbed ends a probe's handshake once the host key is verified.
var errProbed = errors.New("host key verified")

// probeHostKey runs the SSH handshake for t over conn up to the host
// key, which hk checks, and hangs up before any login: nil when the key
// is good, else the *HostKeyError (see Pool.probe).
func probeHostKey(ctx context.Context, t *Target, conn net.Conn, hk *hostKeyCheck) error {
	check := hk.callback
	hk.callback = func(host string, remote net.Addr, key ssh.PublicKey) error {
		if err := check(host, remote, key); err != nil {
			return err
		}
		return errProbed
	}
	client, err := clientConn(ctx, t, conn, hk, nil, nil)
	if err == nil { // cannot be: the callback ends every handshake
		client.Close()
	}
	if errors.Is(err, errProbed) {
		return nil
	}
	return err
}

// clientConn is the handshake over conn, which it closes on failure: hk
// checks the host key and auth logs in, authErr being the error when the
// server accepts none of it, which learns the version the server
// announced.
func clientConn(ctx context.Context, t *Target, conn net.Conn, hk *hostKeyCheck, auth []ssh.AuthMethod, authErr *AuthError) (*ssh.Client, error) {
	cfg := &ssh.ClientConfig{
		User:              t.User,
		Auth:              auth,
		HostKeyCallback:   hk.callback,
		HostKeyAlgorithms: hk.algos,
		ClientVersion:     clientVersion,
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	rc := readAhead(conn)
	c, chans, reqs, err := ssh.NewClientConn(rc, t.addr(), cfg)
	if !stop() {
		if err == nil {
			c.Close()
		}
		return nil, context.Cause(ctx)
	}
	switch {
	case err == nil:
		return ssh.NewClient(c, chans, reqs), nil
	case hk.err != nil:
		err = hk.err
	case authErr != nil && strings.Contains(err.Error(), "unable to authenticate"):
		// x/crypto has no error type for this; its text is stable.
		authErr.ServerVersion = rc.version.String()
		err = authErr
	default:
		err = fmt.Errorf("target %q: ssh handshake with %s: %w", t.Name, t.addr(), err)
	}
	conn.Close()
	return nil, err
}

// readAheadSize is how much a connection reads from its socket at once.
// x/crypto reads each packet in two or three reads through a 4 KiB
// buffer: a drain made some 120 system calls per MB, most of them reads
// of a few KiB, and each one a chance for the Go scheduler to hand the
// thread's P away (BenchmarkMCPSSHDrain, ssh_exec-syscalls/MB).
const readAheadSize = 256 << 10

// readAhead gives conn a read buffer of readAheadSize: one read takes
// what the socket holds, up to that.
func readAhead(conn net.Conn) *readAheadConn {
	return &readAheadConn{Conn: conn, r: bufio.NewReaderSize(conn, readAheadSize)}
}

type readAheadConn struct {
	net.Conn
	r *bufio.Reader
	// version is the server's identification line, recorded as the
	// handshake reads it (before the handshake's goroutines start).
	version versionLine
}

func (c *readAheadConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if !c.version.done {
		c.version.record(p[:n])
	}
	return n, err
}

// dialTCP connects to t directly.
func dialTCP(ctx context.Context, t *Target) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", t.addr())
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, fmt.Errorf("target %q: connect to %s: %w", t.Name, t.addr(), err)
	}
	return conn, nil
}
