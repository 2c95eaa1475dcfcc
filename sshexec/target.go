package sshexec

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// Target is one configured SSH destination. A Pool keys its connections by
// the target's name, address, user and jump chain, so a Target must not be
// changed while a Pool uses it.
type Target struct {
	// Name is the configured name; it appears in errors and logs.
	Name string
	// Host is a host name or IP address.
	Host string
	// Port is the TCP port; zero means 22.
	Port int
	// User is the login name.
	User string
	// KnownHostsPath is the known_hosts file to check the host key against;
	// empty means ~/.ssh/known_hosts. It is not used when HostKey is set.
	KnownHostsPath string
	// HostKey pins the host key by its SHA256 fingerprint ("SHA256:…", as
	// printed by ssh-keygen -lf). Empty means: check KnownHostsPath.
	HostKey string
	// Jump is the target to tunnel through ("ssh -J"); nil means a direct
	// TCP connection. The final host's key is checked against Host:Port.
	Jump *Target
	// Auth holds the credentials.
	Auth Auth
	// MaxConnections is how many connections to the target the pool opens
	// at most: a new one opens when every session of the open ones is in
	// use. Zero means one.
	MaxConnections int
	// MaxSessions is the number of sessions the server allows on one
	// connection (sshd's MaxSessions); it must be at least 1. One of them is
	// kept free for stopping commands when it is more than one, and a lower
	// limit enforced by the server is learned on the way.
	MaxSessions int
	// Keepalive is the interval between keepalive requests on an idle or
	// busy connection, and the time allowed for a reply, for a session to
	// open and for a command to start; zero means 15s. A connection that
	// misses it is closed and redialled by the next call. It must be
	// positive.
	Keepalive time.Duration
	// StopMode selects how a command is stopped; zero means StopSignal.
	StopMode StopMode
	// StopGrace is how long each stage of a stop waits for the command to
	// end before the next, harsher stage; zero means one second.
	StopGrace time.Duration
	// UsePTY requests a pseudo-terminal, so that closing the session hangs
	// up the command even when nothing else can stop it. stdout and stderr
	// then arrive merged on stdout, with CRLF line ends.
	UsePTY bool
	// HostKeyAlias is the name the host key is looked up under in
	// KnownHostsPath instead of Host:Port, as OpenSSH's HostKeyAlias;
	// empty means Host:Port.
	HostKeyAlias string
	// ConnectTimeout bounds each new connection's TCP connect (or tunnel)
	// and handshake; zero means only the caller's context bounds them.
	ConnectTimeout time.Duration
	// AgentSocket is the ssh-agent's socket when Auth.Agent is set; empty
	// means $SSH_AUTH_SOCK.
	AgentSocket string
	// CertTTL is how long a certificate signed with Auth.CA stays valid
	// for a login after it is signed; it must be positive when Auth.CA is
	// set. A command that logged in runs on after it.
	CertTTL time.Duration
	// CertSourceAddress is the source-address critical option of the
	// certificates signed with Auth.CA (addresses or CIDR ranges, comma
	// separated, as sshd reads it); empty sets none.
	CertSourceAddress string
	// SFTPCommand is the force-command of the certificate of a file
	// transfer when Auth.CA is set: "internal-sftp" (sshd's own; empty
	// means it) or the path of the server's sftp-server.
	SFTPCommand string

	// noSubreaper keeps the wrapper from using the host's perl (see
	// supervisor), as on a host without it: for tests.
	noSubreaper bool
}

// StopMode is how a running command is stopped.
type StopMode string

const (
	// StopSignal sends TERM, then KILL, as SSH "signal" requests; when the
	// server refuses them (OpenSSH before 7.9, root logins), it falls back
	// to StopWrapper.
	StopSignal StopMode = "signal"
	// StopWrapper kills the command's process group from a second session
	// on the same connection, without trying "signal" requests first.
	StopWrapper StopMode = "wrapper"
)

// Auth holds the credentials for a target, taken from the keyring by the
// caller. Its String, GoString and LogValue never show the bytes.
type Auth struct {
	// PrivateKey is a PEM or OpenSSH private key.
	PrivateKey []byte
	// Passphrase decrypts PrivateKey when it is encrypted.
	Passphrase []byte
	// Password is tried after the key and the agent.
	Password []byte
	// Agent uses the keys of the ssh-agent at $SSH_AUTH_SOCK.
	Agent bool
	// KeySecret, PassphraseSecret and PasswordSecret name the keyring
	// items the credentials came from, for messages only: an error can
	// then say which item to replace. Empty names none.
	KeySecret, PassphraseSecret, PasswordSecret string
	// Certificate is an OpenSSH user certificate (a *-cert.pub file's
	// contents) for PrivateKey, or for a key of the agent when there is no
	// PrivateKey. It is offered before the plain key, as OpenSSH does.
	// Empty offers none.
	Certificate []byte
	// CertificateSecret and CertificatePath name where Certificate came
	// from (a keyring item, a file), for messages only; empty names none.
	CertificateSecret, CertificatePath string
	// CA makes the target a certificate target: every command logs in on
	// a connection of its own with a new key and a certificate this CA
	// signs for that command alone (see ca.go). No other credential may be
	// set with it. CASecret names its keyring item, for messages only.
	CA       ssh.Signer
	CASecret string
}

// String describes which credentials are present, never their values.
func (a Auth) String() string {
	var have []string
	if len(a.PrivateKey) > 0 {
		have = append(have, "key")
	}
	if len(a.Passphrase) > 0 {
		have = append(have, "passphrase")
	}
	if len(a.Password) > 0 {
		have = append(have, "password")
	}
	if a.Agent {
		have = append(have, "agent")
	}
	if len(a.Certificate) > 0 {
		have = append(have, "certificate")
	}
	if a.CA != nil {
		have = append(have, "ca")
	}
	return "Auth{" + strings.Join(have, ",") + "}"
}

// GoString is String, so that %#v does not print the bytes either.
func (a Auth) GoString() string { return a.String() }

// LogValue is String, so that slog never prints the bytes.
func (a Auth) LogValue() slog.Value { return slog.StringValue(a.String()) }

// MarshalJSON encodes String, so that encoding a Target never leaks the
// bytes.
func (a Auth) MarshalJSON() ([]byte, error) { return json.Marshal(a.String()) }

// ErrNoCredential is returned when a target has neither a key, a password
// nor agent = true.
var ErrNoCredential = errors.New("no credential configured")

const (
	defaultPort      = 22
	defaultStopGrace = time.Second
	maxJumpDepth     = 8
)

func (t *Target) addr() string {
	port := t.Port
	if port == 0 {
		port = defaultPort
	}
	return net.JoinHostPort(t.Host, strconv.Itoa(port))
}

func (t *Target) keepalive() time.Duration { return t.Keepalive }

func (t *Target) maxConnections() int { return max(1, t.MaxConnections) }

func (t *Target) stopGrace() time.Duration {
	if t.StopGrace > 0 {
		return t.StopGrace
	}
	return defaultStopGrace
}

// poolKey identifies the connections a target can share: the same name,
// user, address and jump chain, and the same host-key check and
// credentials. A target rebuilt with another host key or credential (a
// reloaded configuration) gets connections of its own, never one
// verified or logged in under the old settings; the key holds only a
// digest of them.
func (t *Target) poolKey() string {
	h := sha256.New()
	agent := []byte{0}
	if t.Auth.Agent {
		agent[0] = 1
	}
	var ca []byte
	if t.Auth.CA != nil {
		ca = t.Auth.CA.PublicKey().Marshal()
	}
	for _, b := range [][]byte{[]byte(t.KnownHostsPath), []byte(t.HostKey), t.Auth.PrivateKey, t.Auth.Passphrase, t.Auth.Password, agent, t.Auth.Certificate, []byte(t.HostKeyAlias), []byte(t.AgentSocket), ca} {
		h.Write(binary.AppendUvarint(nil, uint64(len(b))))
		h.Write(b)
	}
	k := fmt.Sprintf("%s|%s@%s|%x", t.Name, t.User, t.addr(), h.Sum(nil)[:12])
	if t.Jump != nil {
		k += " via " + t.Jump.poolKey()
	}
	return k
}

// Validate checks t and its jump chain as Run does before it dials, and
// parses their private keys and certificates: a key that cannot be used is
// a *KeyError, a certificate that cannot (not one, expired, for another
// key) a *CertError, found without connecting. A missing credential is
// ErrNoCredential.
func (t *Target) Validate() error {
	if err := t.validate(); err != nil {
		return err
	}
	for cur := t; cur != nil; cur = cur.Jump {
		var key ssh.PublicKey
		if len(cur.Auth.PrivateKey) > 0 {
			signer, err := cur.signer()
			if err != nil {
				return err
			}
			key = signer.PublicKey()
		}
		if _, err := cur.certificate(key, time.Now()); err != nil {
			return err
		}
	}
	return nil
}

// validate checks what Run needs before it dials; errors name the field.
func (t *Target) validate() error {
	for depth, cur := 0, t; cur != nil; depth, cur = depth+1, cur.Jump {
		if depth > maxJumpDepth {
			return fmt.Errorf("target %q: jump chain longer than %d (a loop?)", t.Name, maxJumpDepth)
		}
		switch {
		case cur.Host == "":
			return fmt.Errorf("target %q: host is empty", cur.Name)
		case cur.User == "":
			return fmt.Errorf("target %q: user is empty", cur.Name)
		case cur.MaxSessions < 1:
			return fmt.Errorf("target %q: max sessions %d: want at least 1", cur.Name, cur.MaxSessions)
		case cur.Keepalive <= 0:
			return fmt.Errorf("target %q: keepalive %v: want a positive interval", cur.Name, cur.Keepalive)
		case cur.Port < 0 || cur.Port > 65535:
			return fmt.Errorf("target %q: port %d out of range", cur.Name, cur.Port)
		case cur.StopMode != "" && cur.StopMode != StopSignal && cur.StopMode != StopWrapper:
			return fmt.Errorf("target %q: stop mode %q: want %q or %q", cur.Name, cur.StopMode, StopSignal, StopWrapper)
		case cur.HostKey != "" && !strings.HasPrefix(cur.HostKey, "SHA256:"):
			return fmt.Errorf("target %q: host_key %q: want a SHA256 fingerprint (SHA256:…)", cur.Name, cur.HostKey)
		case cur.Auth.CA != nil && (len(cur.Auth.PrivateKey) > 0 || len(cur.Auth.Password) > 0 || cur.Auth.Agent || len(cur.Auth.Certificate) > 0):
			return fmt.Errorf("target %q: a CA target logs in only with the certificates its CA signs: it takes no key, password, agent or certificate", cur.Name)
		case cur.Auth.CA != nil && cur != t:
			return fmt.Errorf("target %q: the jump host %q is a CA target, whose certificates permit no port forwarding: give the jump host a key", t.Name, cur.Name)
		case cur.Auth.CA != nil && cur.CertTTL <= 0:
			return fmt.Errorf("target %q: certificate validity %v: want a positive duration", cur.Name, cur.CertTTL)
		case cur.Auth.CA != nil:
		case len(cur.Auth.PrivateKey) == 0 && len(cur.Auth.Password) == 0 && !cur.Auth.Agent:
			return fmt.Errorf("target %q: %w", cur.Name, ErrNoCredential)
		case len(cur.Auth.Certificate) > 0 && len(cur.Auth.PrivateKey) == 0 && !cur.Auth.Agent:
			return fmt.Errorf("target %q: a certificate needs its private key (key_secret) or the ssh-agent holding it (agent = true)", cur.Name)
		}
	}
	return nil
}
