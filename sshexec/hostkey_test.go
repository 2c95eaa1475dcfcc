package sshexec

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func TestHostKeys(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	dir := t.TempDir()
	write := func(name string, lines ...string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	other, _ := ssh.NewSignerFromKey(otherPriv)
	ed, ecdsa := s.HostKeys[0], s.HostKeys[1]

	for _, tc := range []struct {
		name       string
		knownHosts string
		pin        string
		// wantErr is nil for a successful login; else the fields the
		// *HostKeyError must have.
		wantErr *HostKeyError
	}{
		// The server also has an ecdsa key, which x/crypto prefers: only
		// the recorded algorithms may be offered.
		{name: "recorded ed25519 only", knownHosts: s.KnownHosts},
		{name: "recorded ecdsa only", knownHosts: write("ecdsa", s.KnownHostsLine(ecdsa))},
		{name: "wildcard line", knownHosts: write("wild", "# comment", "127.0.0.* "+string(ssh.MarshalAuthorizedKey(ed)))},
		{name: "hashed line", knownHosts: write("hashed", knownhosts.HashHostname(knownhosts.Normalize(s.Addr()))+" "+string(ssh.MarshalAuthorizedKey(ed)))},
		{name: "unknown host", knownHosts: write("empty", "# nothing"),
			wantErr: &HostKeyError{Fingerprint: ssh.FingerprintSHA256(ed), KeyType: ed.Type()}},
		{name: "missing file", knownHosts: filepath.Join(dir, "absent"),
			wantErr: &HostKeyError{Fingerprint: ssh.FingerprintSHA256(ed)}},
		{name: "changed key", knownHosts: write("changed", s.KnownHostsLine(other.PublicKey())),
			wantErr: &HostKeyError{Fingerprint: ssh.FingerprintSHA256(ed), Known: true}},
		{name: "revoked", knownHosts: write("revoked", s.KnownHostsLine(ed), "@revoked * "+string(ssh.MarshalAuthorizedKey(ed))),
			wantErr: &HostKeyError{Fingerprint: ssh.FingerprintSHA256(ed), Revoked: true}},
		{name: "pinned", pin: ssh.FingerprintSHA256(ed)},
		{name: "pinned other", pin: ssh.FingerprintSHA256(other.PublicKey()),
			wantErr: &HostKeyError{Fingerprint: ssh.FingerprintSHA256(ed), Pinned: ssh.FingerprintSHA256(other.PublicKey())}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := target(s)
			tg.Name = tc.name
			tg.KnownHostsPath, tg.HostKey = tc.knownHosts, tc.pin
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := p.Check(ctx, tg)
			_, runErr := p.Run(ctx, tg, Request{Command: "true"})
			if tc.wantErr == nil {
				if err != nil || runErr != nil {
					t.Fatalf("Check: %v; Run: %v; want success", err, runErr)
				}
				return
			}
			for _, err := range []error{err, runErr} {
				var hk *HostKeyError
				if !errors.As(err, &hk) {
					t.Fatalf("got %v; want a *HostKeyError", err)
				}
				if hk.Fingerprint != tc.wantErr.Fingerprint || hk.Known != tc.wantErr.Known ||
					hk.Revoked != tc.wantErr.Revoked || hk.Pinned != tc.wantErr.Pinned {
					t.Errorf("got %+v; want %+v", hk, tc.wantErr)
				}
				msg := err.Error()
				if !strings.Contains(msg, hk.Fingerprint) {
					t.Errorf("message %q does not show the presented fingerprint", msg)
				}
				if !hk.Revoked && !strings.Contains(msg, `host_key = "`+hk.Fingerprint+`"`) {
					t.Errorf("message %q does not say how to trust the key", msg)
				}
			}
		})
	}
}

func TestHostCertificate(t *testing.T) {
	caPub, caPriv, _ := ed25519.GenerateKey(rand.Reader)
	ca, _ := ssh.NewSignerFromKey(caPriv)
	sshCA, _ := ssh.NewPublicKey(caPub)
	// The server's certificate must exist before sshd starts: sign a host
	// key made here and give it to sshd as an extra host key.
	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	hostSigner, _ := ssh.NewSignerFromKey(hostPriv)
	cert := &ssh.Certificate{
		Key: hostSigner.PublicKey(), CertType: ssh.HostCert, KeyId: "test",
		ValidPrincipals: []string{"127.0.0.1"}, ValidBefore: ssh.CertTimeInfinity,
	}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyPath, certPath := filepath.Join(dir, "host_cert_key"), filepath.Join(dir, "host_cert_key-cert.pub")
	block, _ := ssh.MarshalPrivateKey(hostPriv, "")
	if err := os.WriteFile(keyPath, pemEncode(block), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certPath, ssh.MarshalAuthorizedKey(cert), 0o644); err != nil {
		t.Fatal(err)
	}
	s := sshtest.Start(t, sshtest.Options{Config: []string{"HostKey " + keyPath, "HostCertificate " + certPath}})
	// docs/ssh.md documents both: a CA for one host, and for a pattern.
	for _, pattern := range []string{"[127.0.0.1]:" + strconv.Itoa(s.Port), "*"} {
		t.Run(pattern, func(t *testing.T) {
			p := newPool(t)
			kh := filepath.Join(t.TempDir(), "known_hosts")
			line := "@cert-authority " + pattern + " " + string(ssh.MarshalAuthorizedKey(sshCA))
			if err := os.WriteFile(kh, []byte(line), 0o600); err != nil {
				t.Fatal(err)
			}
			tg := target(s)
			tg.KnownHostsPath = kh
			out, err := runCmd(t, p, tg, "echo ok")
			if err != nil || out.stdout != "ok\n" {
				t.Fatalf("Run with %q: %+v, %v; want ok", line, out, err)
			}
		})
	}
}

// TestTrustHostKey: an unknown key trusted is written once, to a file and
// directory only the user may read, and verified from then on; a changed
// key cannot be trusted this way.
func TestTrustHostKey(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tg := target(s)
	tg.KnownHostsPath = filepath.Join(t.TempDir(), "ssh", "known_hosts")
	var hk *HostKeyError
	if err := p.Check(ctx, tg); !errors.As(err, &hk) || !hk.Unknown() {
		t.Fatalf("first contact: %v; want an unknown host key", err)
	}
	for range 2 {
		if err := TrustHostKey(hk); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(tg.KnownHostsPath)
	if err != nil || string(b) != hk.Line+"\n" {
		t.Fatalf("known_hosts = %q, %v; want the one line %q", b, err, hk.Line)
	}
	for path, want := range map[string]os.FileMode{tg.KnownHostsPath: 0o600, filepath.Dir(tg.KnownHostsPath): 0o700} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v; want mode %v", path, fi, err, want)
		}
	}
	if _, err := p.Run(ctx, tg, Request{Command: "true"}); err != nil {
		t.Fatalf("after trust: %v", err)
	}

	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	other, _ := ssh.NewSignerFromKey(otherPriv)
	changed := target(s)
	changed.Name = "changed"
	changed.KnownHostsPath = filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(changed.KnownHostsPath, []byte(s.KnownHostsLine(other.PublicKey())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.Check(ctx, changed); !errors.As(err, &hk) || hk.Unknown() {
		t.Fatalf("changed key: %v; want a known host with another key", err)
	}
	if err := TrustHostKey(hk); err == nil {
		t.Error("a changed key was trusted")
	}
}
