package sshexec

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
)

// TestCertificate logs in to a real sshd that trusts a CA made with
// ssh-keygen, with a key that is not in authorized_keys: only its
// certificate can log in.
func TestCertificate(t *testing.T) {
	ca, otherCA := sshtest.NewCA(t), sshtest.NewCA(t)
	s := sshtest.Start(t, sshtest.Options{TrustedUserCAKeys: ca.PublicKey})
	p := newPool(t)
	key, signer := sshtest.NewKey(t) // not in authorized_keys
	strangerKey, stranger := sshtest.NewKey(t)
	authorized, err := ssh.ParsePrivateKey(s.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	cert := ca.Sign(t, signer.PublicKey(), "alice@laptop", s.User, "")
	agentSock := startAgent(t, key)
	strangerAgent := startAgent(t, strangerKey)

	for _, tc := range []struct {
		name  string
		auth  Auth
		agent string // SSH_AUTH_SOCK
		// check is nil for a successful login.
		check func(error) bool
		// predial: Validate finds the error without connecting.
		predial bool
	}{
		{name: "certificate", auth: Auth{PrivateKey: key, Certificate: cert}},
		{name: "certificate valid now", auth: Auth{PrivateKey: key, Certificate: ca.Sign(t, signer.PublicKey(), "alice", s.User, "-5m:+1h")}},
		{name: "certificate with a key of the agent", auth: Auth{Agent: true, Certificate: cert}, agent: agentSock},
		{name: "the key alone is not authorized", auth: Auth{PrivateKey: key},
			check: all(isAuthError, contains("authorized_keys"), not(contains("certificate")))},
		{name: "another principal", auth: Auth{PrivateKey: key, CertificateSecret: "box-cert",
			Certificate: ca.Sign(t, signer.PublicKey(), "bob@laptop", "someone-else", "")},
			check: all(isAuthError, contains(`key id "bob@laptop"`), contains(`principals "someone-else" do not include the user "`+s.User+`"`),
				contains("AuthorizedPrincipalsFile"), contains("sign it with -n "+s.User))},
		{name: "no principals", auth: Auth{PrivateKey: key, Certificate: ca.Sign(t, signer.PublicKey(), "nobody", "", "")},
			check: all(isAuthError, contains("names no principal"))},
		{name: "CA not trusted", auth: Auth{PrivateKey: key, Certificate: otherCA.Sign(t, signer.PublicKey(), "carol@laptop", s.User, "")},
			check: all(isAuthError, contains(`key id "carol@laptop"`), contains("TrustedUserCAKeys"), contains("signed by CA SHA256:"), contains(`principals "`+s.User+`"`))},
		// OpenSSH offers the plain key after the certificate: a server
		// that does not trust the CA still accepts an authorized key.
		{name: "untrusted certificate, authorized key", auth: Auth{PrivateKey: s.ClientKey,
			Certificate: otherCA.Sign(t, authorized.PublicKey(), "dave", s.User, "")}},
		{name: "expired", auth: Auth{PrivateKey: key, CertificatePath: "/home/u/.ssh/id-cert.pub",
			Certificate: ca.Sign(t, signer.PublicKey(), "erin", s.User, "20200101:20200102")}, predial: true,
			check: all(isCertError(CertExpired), contains("certificate file /home/u/.ssh/id-cert.pub has expired"),
				contains("to 2020-01-02T"), contains(`key id "erin"`), contains("it is now "))},
		{name: "not yet valid", auth: Auth{PrivateKey: key, Certificate: ca.Sign(t, signer.PublicKey(), "frank", s.User, "+52w:+53w")}, predial: true,
			check: all(isCertError(CertNotYetValid), contains("is not valid yet"), contains(`key id "frank"`))},
		{name: "certificate of another key", auth: Auth{PrivateKey: key, CertificateSecret: "box-cert",
			Certificate: ca.Sign(t, stranger.PublicKey(), "grace", s.User, "")}, predial: true,
			check: all(isCertError(CertKeyMismatch), contains(`keyring item "box-cert" (certificate_secret)`),
				contains(ssh.FingerprintSHA256(stranger.PublicKey())), contains(ssh.FingerprintSHA256(signer.PublicKey())))},
		{name: "agent without the certificate's key", auth: Auth{Agent: true, Certificate: cert}, agent: strangerAgent,
			check: all(isAuthError, contains("the ssh-agent holds no key "+ssh.FingerprintSHA256(signer.PublicKey())), contains("ssh-add"))},
		{name: "host certificate", auth: Auth{PrivateKey: key, Certificate: ca.SignHost(t, signer.PublicKey(), "host", "box.example")}, predial: true,
			check: all(isCertError(CertNotUser), contains("is a host certificate"))},
		{name: "private key as certificate", auth: Auth{PrivateKey: key, Certificate: key, CertificateSecret: "box-cert"}, predial: true,
			check: all(isCertError(CertNotACert), contains(`keyring item "box-cert" (certificate_secret) holds a private key, not a certificate`))},
		{name: "certificate without a key", auth: Auth{Password: []byte("a-password-here"), Certificate: cert}, predial: true,
			check: contains("a certificate needs its private key (key_secret) or the ssh-agent")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SSH_AUTH_SOCK", tc.agent)
			tg := target(s)
			tg.Name, tg.Auth = tc.name, tc.auth
			verr := tg.Validate()
			if tc.predial != (verr != nil) {
				t.Fatalf("Validate() = %v; want an error: %v", verr, tc.predial)
			}
			out, err := runCmd(t, p, tg, "id -un")
			if tc.check == nil {
				if err != nil || strings.TrimSpace(out.stdout) != tg.User {
					t.Fatalf("got %q, %v; want login as %s", out.stdout, err, tg.User)
				}
				return
			}
			t.Log(err)
			if err == nil || !tc.check(err) {
				t.Fatalf("got %v; want the %s error", err, tc.name)
			}
			if verr != nil && verr.Error() != err.Error() {
				t.Errorf("Validate() = %v; want the error Run gives: %v", verr, err)
			}
			if blob := certBlob(tc.auth.Certificate); blob != "" && strings.Contains(err.Error(), blob) {
				t.Errorf("error %q contains the certificate", err)
			}
			if text := tg.Auth.String(); strings.Contains(text, "cert-v01") || bytes.Contains(tc.auth.Certificate, []byte(text)) {
				t.Errorf("Auth.String() = %q; want no certificate bytes", text)
			}
		})
	}
}

func isCertError(p CertProblem) func(error) bool {
	return func(err error) bool {
		var ce *CertError
		return errors.As(err, &ce) && ce.Problem == p
	}
}

// certBlob is the base64 field of an authorized_keys line.
func certBlob(line []byte) string {
	f := strings.Fields(string(line))
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// TestParseCertificate checks what a file given as a certificate may hold,
// with certificates ssh-keygen made.
func TestParseCertificate(t *testing.T) {
	ca := sshtest.NewCA(t)
	key, signer := sshtest.NewKey(t)
	now := time.Now()
	shadow := []byte("root:$y$j9T$abcdefghijklmnopqrstuv$0123456789abcdefghijklmnopqrstuvwxyzABCDE:19000:0:99999:7:::\n")
	for _, tc := range []struct {
		name string
		data []byte
		want CertProblem // 0: parses
	}{
		{"user certificate", ca.Sign(t, signer.PublicKey(), "id", "deploy", ""), 0},
		{"expired", ca.Sign(t, signer.PublicKey(), "id", "deploy", "20200101:20200102"), CertExpired},
		{"host certificate", ca.SignHost(t, signer.PublicKey(), "id", "box"), CertNotUser},
		{"plain public key", ssh.MarshalAuthorizedKey(signer.PublicKey()), CertNotACert},
		{"private key", key, CertNotACert},
		{"shadow file", shadow, CertNotACert},
		{"empty", nil, CertNotACert},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCertificate(tc.data, now)
			var ce *CertError
			switch {
			case tc.want == 0 && err != nil:
				t.Fatalf("got %v; want no error", err)
			case tc.want != 0 && (!errors.As(err, &ce) || ce.Problem != tc.want):
				t.Fatalf("got %v; want a *CertError with problem %d", err, tc.want)
			}
			if err != nil && len(tc.data) > 0 && strings.Contains(err.Error(), strings.Fields(string(tc.data))[0][:8]) {
				t.Errorf("error %q quotes the data", err)
			}
		})
	}
}

// FuzzParseCertificate feeds arbitrary file contents to ParseCertificate:
// what it accepts is a user certificate, and its errors never quote the
// data (a private key or a password file named by mistake).
func FuzzParseCertificate(f *testing.F) {
	key, signer := sshtest.NewKey(f)
	f.Add(key)
	f.Add(ssh.MarshalAuthorizedKey(signer.PublicKey()))
	f.Add([]byte("root:$y$j9T$secretsecretsecret:19000:0:99999:7:::\n"))
	cert := &ssh.Certificate{Key: signer.PublicKey(), CertType: ssh.UserCert, KeyId: "id", ValidPrincipals: []string{"deploy"}, ValidBefore: ssh.CertTimeInfinity}
	if err := cert.SignCert(rand.Reader, signer); err != nil {
		f.Fatal(err)
	}
	f.Add(ssh.MarshalAuthorizedKey(cert))
	now := time.Now()
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCertificate(data, now)
		if err == nil {
			if c.CertType != ssh.UserCert {
				t.Fatalf("accepted a certificate of type %d", c.CertType)
			}
			return
		}
		var ce *CertError
		if !errors.As(err, &ce) {
			t.Fatalf("error %v is not a *CertError", err)
		}
		if ce.Problem == CertNotACert {
			for _, field := range bytes.Fields(data) {
				if len(field) >= 8 && strings.Contains(err.Error(), string(field)) {
					t.Fatalf("error %q quotes the data", err)
				}
			}
		}
	})
}
