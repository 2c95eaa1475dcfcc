package sshexec

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// AuthError reports that the server accepted none of the target's
// credentials.
type AuthError struct {
	Target, User string
	Methods      []string // the methods that were offered: publickey, password
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("target %q: server refused login as %q with %s: check that the key is in the user's authorized_keys, or the password",
		e.Target, e.User, strings.Join(e.Methods, " and "))
}

// clientVersion is sent in the SSH banner so that server logs show the tool.
const clientVersion = "SSH-2.0-actiongw"

// authMethods builds the client's auth methods from the target's credential
// bytes. The returned closer ends the agent connection, which is only needed
// during the handshake.
func authMethods(t *Target) ([]ssh.AuthMethod, []string, func(), error) {
	var signers []ssh.Signer
	closer := func() {}
	if len(t.Auth.PrivateKey) > 0 {
		var signer ssh.Signer
		var err error
		if len(t.Auth.Passphrase) > 0 {
			signer, err = ssh.ParsePrivateKeyWithPassphrase(t.Auth.PrivateKey, t.Auth.Passphrase)
		} else {
			signer, err = ssh.ParsePrivateKey(t.Auth.PrivateKey)
		}
		var missing *ssh.PassphraseMissingError
		switch {
		case errors.As(err, &missing):
			return nil, nil, closer, fmt.Errorf("target %q: the private key is encrypted and no passphrase is configured", t.Name)
		case errors.Is(err, x509.IncorrectPasswordError):
			return nil, nil, closer, fmt.Errorf("target %q: the passphrase does not decrypt the private key", t.Name)
		case err != nil:
			// x/crypto's parse errors describe the format, never the bytes.
			return nil, nil, closer, fmt.Errorf("target %q: parse private key: %w", t.Name, err)
		}
		signers = append(signers, signer)
	}
	var agentSigners func() ([]ssh.Signer, error)
	if t.Auth.Agent {
		sock := os.Getenv("SSH_AUTH_SOCK")
		if sock == "" {
			return nil, nil, closer, fmt.Errorf("target %q: agent = true but SSH_AUTH_SOCK is not set", t.Name)
		}
		conn, err := net.Dial("unix", sock)
		if err != nil {
			return nil, nil, closer, fmt.Errorf("target %q: connect to ssh-agent: %w", t.Name, err)
		}
		closer = func() { conn.Close() }
		agentSigners = agent.NewClient(conn).Signers
	}

	var methods []ssh.AuthMethod
	var names []string
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
			return append(signers, more...), nil
		}))
		names = append(names, "publickey")
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
		names = append(names, "password")
	}
	return methods, names, closer, nil
}

// handshake runs the SSH handshake for t over conn, which it closes on
// failure. ctx bounds the whole handshake: when it ends, conn is closed and
// the handshake fails at once.
func handshake(ctx context.Context, t *Target, conn net.Conn) (*ssh.Client, error) {
	hk, err := newHostKeyCheck(t)
	if err != nil {
		conn.Close()
		return nil, err
	}
	auth, names, closeAgent, err := authMethods(t)
	defer closeAgent()
	if err != nil {
		conn.Close()
		return nil, err
	}
	cfg := &ssh.ClientConfig{
		User:              t.User,
		Auth:              auth,
		HostKeyCallback:   hk.callback,
		HostKeyAlgorithms: hk.algos,
		ClientVersion:     clientVersion,
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	c, chans, reqs, err := ssh.NewClientConn(conn, t.addr(), cfg)
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
	case strings.Contains(err.Error(), "unable to authenticate"):
		// x/crypto has no error type for this; its text is stable.
		err = &AuthError{Target: t.Name, User: t.User, Methods: names}
	default:
		err = fmt.Errorf("target %q: ssh handshake with %s: %w", t.Name, t.addr(), err)
	}
	conn.Close()
	return nil, err
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
