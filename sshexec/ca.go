package sshexec

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// A target whose Auth.CA is set logs in with a certificate signed for one
// command: each command (and each control script of a stop) gets a new
// ed25519 key and a certificate whose force-command is exactly what is
// sent, on a connection of its own that nothing else shares. The
// target's sshd then enforces what runs, whatever the client asks for on
// that connection.

// certBackdate is how long before now a certificate is valid from, for a
// host whose clock is a little behind.
const certBackdate = 30 * time.Second

// NewCA returns a new ed25519 certificate authority: its private key as an
// OpenSSH PEM block (for the keyring) and its public key in
// authorized_keys form with comment (the line for sshd's
// TrustedUserCAKeys).
func NewCA(comment string) (private, public []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, nil, err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, nil, err
	}
	line := strings.TrimSuffix(string(ssh.MarshalAuthorizedKey(sshPub)), "\n")
	if comment != "" {
		line += " " + comment
	}
	return pem.EncodeToMemory(block), []byte(line + "\n"), nil
}

// ParseCA parses a CA private key as NewCA makes it; its errors are
// *KeyError (naming secret, never the bytes).
func ParseCA(target, secret string, private []byte) (ssh.Signer, error) {
	t := &Target{Name: target, Auth: Auth{PrivateKey: private, KeySecret: secret}}
	return t.signer()
}

// NewSerial returns a random certificate serial, never zero.
func NewSerial() uint64 {
	var b [8]byte
	for {
		rand.Read(b[:])
		if s := binary.BigEndian.Uint64(b[:]); s != 0 {
			return s
		}
	}
}

// grant is what one certificate allows: command as its force-command,
// under keyID and serial, with a terminal when pty is set.
type grant struct {
	keyID   string
	serial  uint64
	command string
	pty     bool
}

// certSignerFor signs, with t's CA, a certificate for a new ed25519 key
// that allows g and nothing else: the target's user as its only
// principal, valid from certBackdate before now for t.CertTTL, the
// force-command g.command (and t.CertSourceAddress as source-address),
// and no extension but permit-pty when g.pty: no port, agent or X11
// forwarding, no user rc. The key lives only in the returned signer.
func (t *Target) certSignerFor(g grant, now time.Time) (ssh.Signer, *ssh.Certificate, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	key, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, nil, err
	}
	ttl := t.CertTTL
	cert := &ssh.Certificate{
		Key:             key.PublicKey(),
		Serial:          g.serial,
		CertType:        ssh.UserCert,
		KeyId:           g.keyID,
		ValidPrincipals: []string{t.User},
		ValidAfter:      uint64(now.Add(-certBackdate).Unix()),
		ValidBefore:     uint64(now.Add(ttl).Unix()),
		Permissions: ssh.Permissions{
			CriticalOptions: map[string]string{"force-command": g.command},
			Extensions:      map[string]string{},
		},
	}
	if t.CertSourceAddress != "" {
		cert.CriticalOptions["source-address"] = t.CertSourceAddress
	}
	if g.pty {
		cert.Extensions["permit-pty"] = ""
	}
	if err := cert.SignCert(rand.Reader, t.Auth.CA); err != nil {
		return nil, nil, fmt.Errorf("target %q: sign a certificate with the CA of keyring item %q: %w", t.Name, t.Auth.CASecret, err)
	}
	signer, err := ssh.NewCertSigner(cert, key)
	if err != nil {
		return nil, nil, err
	}
	return signer, cert, nil
}

// certified dials t on a new connection of its own, logging in with a
// certificate that allows only g; the connection is not pooled: the
// caller closes it.
func (p *Pool) certified(ctx context.Context, t *Target, g grant) (*conn, error) {
	signer, cert, err := t.certSignerFor(g, time.Now())
	if err != nil {
		return nil, err
	}
	if p.signed != nil {
		p.signed(cert)
	}
	client, err := p.dialAs(ctx, t, signer)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		client.Close()
		return nil, ErrPoolClosed
	}
	c := p.startConn(t, client)
	c.single = true
	return c, nil
}

// controlGrant is the grant of a control script of the run whose
// certificate was g: its own command, the key id marked as a control script's.
func controlGrant(g grant, command string) grant {
	return grant{keyID: g.keyID + " (control)", serial: NewSerial(), command: command}
}

// checkCA is Check for a CA target.
func (p *Pool) checkCA(ctx context.Context, t *Target) error {
	c, err := p.certified(ctx, t, grant{keyID: "actiongw check", serial: NewSerial(), command: "true"})
	if err != nil {
		return err
	}
	defer c.release()
	ch, reqs, err := c.open(ctx)
	if err != nil {
		return fmt.Errorf("target %q: open session: %w", t.Name, err)
	}
	s := startSession(ch, reqs, io.Discard, io.Discard, nil)
	err = s.exec(t, "true", nil, t.keepalive())
	if err == nil {
		select {
		case <-s.done:
		case <-ctx.Done():
			err = context.Cause(ctx)
		}
	}
	ch.Close()
	<-s.done
	if err != nil {
		return fmt.Errorf("target %q: run the certificate's forced command `true`: %w", t.Name, err)
	}
	if code, signal, _ := s.exit(); code == nil || *code != 0 {
		got := "no exit status"
		switch {
		case code != nil:
			got = fmt.Sprintf("exit status %d", *code)
		case signal != "":
			got = "signal " + signal
		}
		version, _ := caVersionAdvice(string(c.client.ServerVersion()))
		return fmt.Errorf("target %q: logged in with a certificate of the CA, but its forced command `true` ended with %s: "+
			"sshd must run a certificate's force-command, and the login shell of %s must run it; %s", t.Name, got, t.User, version)
	}
	return nil
}
