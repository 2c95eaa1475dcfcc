package sshexec

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
	"unicode"

	"golang.org/x/crypto/ssh"
)

func TestOpenSSHVersion(t *testing.T) {
	for _, c := range []struct {
		name, announced string
		major, minor    int
		ok              bool
	}{
		{"debian", "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3", 9, 2, true},
		{"plain", "SSH-2.0-OpenSSH_7.4", 7, 4, true},
		{"two-digit major", "SSH-2.0-OpenSSH_10.0", 10, 0, true},
		{"two-digit minor", "SSH-2.0-OpenSSH_6.10p2", 6, 10, true},
		{"windows", "SSH-2.0-OpenSSH_for_Windows_8.1", 8, 1, true},
		{"protocol 1.99", "SSH-1.99-OpenSSH_5.3", 5, 3, true},
		{"old", "SSH-2.0-OpenSSH_5.3p1 Debian-3ubuntu7", 5, 3, true},
		{"minor with suffix only", "SSH-2.0-OpenSSH_6.5-hpn14v2", 6, 5, true},
		{"dropbear", "SSH-2.0-dropbear_2022.83", 0, 0, false},
		{"x/crypto", "SSH-2.0-Go", 0, 0, false},
		{"openssh in a comment only", "SSH-2.0-Other OpenSSH_9.2", 0, 0, false},
		{"no minor", "SSH-2.0-OpenSSH_9", 0, 0, false},
		{"empty minor", "SSH-2.0-OpenSSH_9.", 0, 0, false},
		{"signed major", "SSH-2.0-OpenSSH_+9.2", 0, 0, false},
		{"negative", "SSH-2.0-OpenSSH_-1.2", 0, 0, false},
		{"huge", "SSH-2.0-OpenSSH_99999999999999999999.1", 0, 0, false},
		{"protocol 1", "SSH-1.5-OpenSSH_9.2", 0, 0, false},
		{"no prefix", "OpenSSH_9.2", 0, 0, false},
		{"empty", "", 0, 0, false},
		{"escape codes", "SSH-2.0-OpenSSH_9.2\x1b[2J", 9, 2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			major, minor, ok := openSSHVersion(c.announced)
			if major != c.major || minor != c.minor || ok != c.ok {
				t.Errorf("openSSHVersion(%q) = %d, %d, %v; want %d, %d, %v", c.announced, major, minor, ok, c.major, c.minor, c.ok)
			}
		})
	}
}

func TestCAVersionAdvice(t *testing.T) {
	for _, c := range []struct {
		name, announced string
		tooOld          bool
		want            []string
	}{
		{"recent", "SSH-2.0-OpenSSH_9.2p1 Debian-2", false, []string{`"SSH-2.0-OpenSSH_9.2p1 Debian-2"`, "recent enough"}},
		{"exactly 6.5", "SSH-2.0-OpenSSH_6.5", false, []string{"recent enough"}},
		{"no ed25519 certificates", "SSH-2.0-OpenSSH_6.4", true, []string{"older than OpenSSH 6.5", "that is why"}},
		{"no v01 certificates either", "SSH-2.0-OpenSSH_5.4", true, []string{"OpenSSH 5.6 for certificates with a force-command", "and OpenSSH 6.5"}},
		{"not OpenSSH", "SSH-2.0-dropbear_2022.83", false, []string{`"SSH-2.0-dropbear_2022.83", which is not OpenSSH`}},
		{"not known", "", false, []string{"OpenSSH 6.5 or later"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, tooOld := caVersionAdvice(c.announced)
			if tooOld != c.tooOld {
				t.Errorf("caVersionAdvice(%q): too old %v; want %v", c.announced, tooOld, c.tooOld)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("caVersionAdvice(%q) = %q; want it to contain %q", c.announced, got, w)
				}
			}
		})
	}
}

func TestVersionLine(t *testing.T) {
	for _, c := range []struct{ name, read, want string }{
		{"crlf", "SSH-2.0-OpenSSH_9.2\r\nbinary", "SSH-2.0-OpenSSH_9.2"},
		{"lf only", "SSH-2.0-OpenSSH_9.2\n", "SSH-2.0-OpenSSH_9.2"},
		{"lines before it", "banner line\r\nanother\nSSH-2.0-OpenSSH_9.2\r\n", "SSH-2.0-OpenSSH_9.2"},
		{"not whole yet", "SSH-2.0-OpenSSH_9.2", ""},
		{"never", "hello\nworld\n", ""},
		{"overlong kept to the limit", "SSH-2.0-" + strings.Repeat("x", 300) + "\r\n", "SSH-2.0-" + strings.Repeat("x", maxVersionBytes-len("SSH-2.0-"))},
		{"what follows is not read", "SSH-2.0-A\r\nSSH-2.0-B\r\n", "SSH-2.0-A"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, chunk := range []int{1, 3, len(c.read)} {
				var v versionLine
				for s := c.read; s != ""; {
					n := min(chunk, len(s))
					if !v.done {
						v.record([]byte(s[:n]))
					}
					s = s[n:]
				}
				if got := v.String(); got != c.want {
					t.Errorf("in reads of %d bytes: got %q; want %q", chunk, got, c.want)
				}
			}
		})
	}
}

// newSigner is a new ed25519 key.
func newSigner(t testing.TB) ssh.Signer {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return signer
}

// caAuthError is the error of a refused certificate login on a server
// that announced version.
func caAuthError(t testing.TB, version string) *AuthError {
	tg := &Target{Name: "web", User: "deploy", Auth: Auth{CA: newSigner(t), CASecret: "ca"}, CertTTL: time.Minute}
	signer, _, err := tg.certSignerFor(grant{keyID: "act-1", serial: 1, command: "true"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, ae, _, _ := certAuth(tg, signer)
	ae.ServerVersion = version
	return ae
}

// FuzzServerVersion: whatever a server announces, the parser keeps to
// what it found (a release it parses reads back the same), and the
// refusal's text holds it quoted: no terminal codes, no line breaks.
func FuzzServerVersion(f *testing.F) {
	for _, s := range []string{"SSH-2.0-OpenSSH_9.2p1 Debian-2", "SSH-2.0-OpenSSH_for_Windows_8.1", "SSH-1.99-OpenSSH_5.3",
		"SSH-2.0-dropbear", "SSH-2.0-OpenSSH_6.4\x1b]0;owned\x07", "SSH-2.0-OpenSSH_9.2\rforged\u2028line\u202e", "banner\nSSH-2.0-x\r\n"} {
		f.Add(s)
	}
	ae := caAuthError(f, "")
	f.Fuzz(func(t *testing.T, read string) {
		var v versionLine
		v.record([]byte(read))
		announced := v.String()
		if v.done && (!strings.HasPrefix(announced, "SSH-") || strings.Contains(announced, "\n") || len(announced) > maxVersionBytes) {
			t.Fatalf("recorded %q from %q", announced, read)
		}
		for _, s := range []string{read, announced} {
			if major, minor, ok := openSSHVersion(s); ok {
				again := fmt.Sprintf("SSH-2.0-OpenSSH_%d.%d", major, minor)
				if m2, n2, ok2 := openSSHVersion(again); !ok2 || m2 != major || n2 != minor || major < 0 || minor < 0 {
					t.Fatalf("%q parsed as %d.%d, which reads back as %d.%d, %v", s, major, minor, m2, n2, ok2)
				}
			}
			e := *ae
			e.ServerVersion = s
			for _, r := range e.Error() {
				if !unicode.IsPrint(r) {
					t.Fatalf("the error for version %q holds %U: %q", s, r, e.Error())
				}
			}
		}
	})
}

// TestCARefusedOldServer: an SSH server that announces an OpenSSH older
// than ed25519 certificates, with terminal codes (those its library lets
// it send: DEL, a C1 CSI byte, a bidi override), and refuses the
// certificate: the error says the version is the cause, quoted. (x/crypto's
// server stands in for an old sshd, which the test machine has not.)
func TestCARefusedOldServer(t *testing.T) {
	version := "SSH-2.0-OpenSSH_6.2p2 \x7f\x9b2J\u202eforged"
	hostKey := newSigner(t)
	cfg := &ssh.ServerConfig{ServerVersion: version, PublicKeyCallback: func(ssh.ConnMetadata, ssh.PublicKey) (*ssh.Permissions, error) {
		return nil, errors.New("no")
	}}
	cfg.AddHostKey(hostKey)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		ssh.NewServerConn(c, cfg)
	}()
	ca := newSigner(t)
	tg := &Target{Name: "old", Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port, User: "deploy",
		HostKey: ssh.FingerprintSHA256(hostKey.PublicKey()), Auth: Auth{CA: ca, CASecret: "ca"}, CertTTL: time.Minute,
		MaxSessions: 10, Keepalive: 15 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = newPool(t).Check(ctx, tg)
	ln.Close()
	select {
	case <-served:
	case <-time.After(30 * time.Second):
		t.Fatal("the old server's connection did not end within 30 s of the client's check")
	}
	var refused *AuthError
	if !errors.As(err, &refused) || refused.ServerVersion != version {
		t.Fatalf("got %v; want an *AuthError that recorded the version %q", err, version)
	}
	msg := err.Error()
	if !strings.Contains(msg, "OpenSSH 6.2 is older than OpenSSH 6.5 for ed25519 certificates") || !strings.Contains(msg, "that is why") {
		t.Errorf("got %q; want the old version named as the cause", msg)
	}
	if strings.ContainsAny(msg, "\x7f\u202e\r\n") || strings.Contains(msg, "\x9b") || !strings.Contains(msg, `\x7f\x9b2J\u202eforged`) {
		t.Errorf("got %q; want the version quoted, its control bytes escaped", msg)
	}
}
