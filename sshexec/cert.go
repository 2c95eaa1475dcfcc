package sshexec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// CertProblem is what is wrong with an SSH user certificate.
type CertProblem int

const (
	// CertNotACert: the bytes are no OpenSSH certificate (a private key, a
	// plain public key, anything else).
	CertNotACert CertProblem = iota + 1
	// CertNotUser: a host certificate, which no server accepts for a login.
	CertNotUser
	// CertNotYetValid: its validity starts after now.
	CertNotYetValid
	// CertExpired: its validity ended before now.
	CertExpired
	// CertKeyMismatch: it certifies another key than the private key.
	CertKeyMismatch
)

// CertError reports a user certificate that cannot be used. The
// certificate is public but identifies its holder: the error names its key
// id, principals, validity and fingerprint, never its bytes, and never the
// bytes of a file that is not one.
type CertError struct {
	// Target is empty when the certificate was checked outside a target
	// (ParseCertificate at config load).
	Target string
	// Secret and Path name where the certificate came from
	// (Auth.CertificateSecret, Auth.CertificatePath); empty when unknown.
	Secret, Path string
	Problem      CertProblem
	// PrivateKey and PublicKey tell what the bytes are instead
	// (CertNotACert): a private key, or a plain public key.
	PrivateKey, PublicKey bool
	// KeyID, Principals, ValidAfter, ValidBefore and Fingerprint (of the
	// certified key) describe the certificate; they are zero for
	// CertNotACert. A zero ValidAfter or ValidBefore is no bound.
	KeyID                   string
	Principals              []string
	ValidAfter, ValidBefore time.Time
	Fingerprint             string
	// KeyFingerprint is the private key's fingerprint (CertKeyMismatch).
	KeyFingerprint string
	// Now is the time the validity was checked at.
	Now time.Time
}

func (e *CertError) Error() string {
	var b strings.Builder
	if e.Target != "" {
		fmt.Fprintf(&b, "target %q: ", e.Target)
	}
	switch {
	case e.Secret != "":
		fmt.Fprintf(&b, "keyring item %q (certificate_secret)", e.Secret)
	case e.Path != "":
		fmt.Fprintf(&b, "certificate file %s", e.Path)
	default:
		b.WriteString("the certificate")
	}
	b.WriteString(" ")
	switch e.Problem {
	case CertNotACert:
		what := "is not an OpenSSH certificate"
		switch {
		case e.PrivateKey:
			what = "holds a private key, not a certificate"
		case e.PublicKey:
			what = "holds a plain public key, not a certificate"
		}
		b.WriteString(what + "; give the *-cert.pub file that ssh-keygen -s wrote (ssh-keygen -Lf FILE shows one)")
	case CertNotUser:
		fmt.Fprintf(&b, "is a host certificate (%s); a login needs a user certificate (ssh-keygen -s without -h)", e.describe())
	case CertNotYetValid:
		fmt.Fprintf(&b, "is not valid yet: %s, and it is now %s; check the clock, or sign a certificate valid now", e.describe(), stamp(e.Now))
	case CertExpired:
		fmt.Fprintf(&b, "has expired: %s, and it is now %s; sign a new one (ssh-keygen -s CA -I ID -n USER -V +52w KEY.pub)", e.describe(), stamp(e.Now))
	case CertKeyMismatch:
		fmt.Fprintf(&b, "(%s) certifies another key than the private key (key_secret), which is %s; give the certificate of that key, or the key the certificate was signed for",
			e.describe(), e.KeyFingerprint)
	}
	return b.String()
}

// describe names the certificate: key id, principals, validity and the
// certified key's fingerprint.
func (e *CertError) describe() string {
	return certSummary(e.KeyID, e.Principals, e.ValidAfter, e.ValidBefore, e.Fingerprint)
}

func certSummary(id string, principals []string, after, before time.Time, fp string) string {
	p := "no principals"
	if len(principals) > 0 {
		p = "principals " + quoteList(principals)
	}
	valid := "valid forever"
	switch {
	case !after.IsZero() && !before.IsZero():
		valid = "valid from " + stamp(after) + " to " + stamp(before)
	case !after.IsZero():
		valid = "valid from " + stamp(after)
	case !before.IsZero():
		valid = "valid until " + stamp(before)
	}
	return fmt.Sprintf("key id %q, %s, %s, key %s", id, p, valid, fp)
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// certTime converts a certificate's validity bound; 0 and
// ssh.CertTimeInfinity are no bound (the zero time).
func certTime(v uint64) time.Time {
	if v == 0 || v >= 1<<63 {
		return time.Time{}
	}
	return time.Unix(int64(v), 0)
}

// ParseCertificate parses an OpenSSH user certificate in authorized_keys
// form (a *-cert.pub file) and checks that it is a user certificate valid
// at now. Its errors are *CertError; they never quote data.
func ParseCertificate(data []byte, now time.Time) (*ssh.Certificate, error) {
	pub, _, _, _, err := ssh.ParseAuthorizedKey(data)
	cert, ok := pub.(*ssh.Certificate)
	if err != nil || !ok {
		return nil, &CertError{Problem: CertNotACert, PublicKey: err == nil,
			PrivateKey: bytes.Contains(data, []byte("PRIVATE KEY"))}
	}
	e := &CertError{KeyID: cert.KeyId, Principals: cert.ValidPrincipals,
		ValidAfter: certTime(cert.ValidAfter), ValidBefore: certTime(cert.ValidBefore),
		Fingerprint: ssh.FingerprintSHA256(cert.Key), Now: now}
	switch {
	case cert.CertType != ssh.UserCert:
		e.Problem = CertNotUser
	case !e.ValidAfter.IsZero() && now.Before(e.ValidAfter):
		e.Problem = CertNotYetValid
	case !e.ValidBefore.IsZero() && !now.Before(e.ValidBefore):
		e.Problem = CertExpired
	default:
		return cert, nil
	}
	return nil, e
}

// maxCertFileBytes bounds what ReadCertificateFile reads: a certificate is
// a few KiB even for an RSA 8192 key.
const maxCertFileBytes = 64 << 10

// ReadCertificateFile reads a certificate file. It refuses anything but a
// regular file of at most 64 KiB, so that a device or a pipe named by
// mistake cannot block or exhaust memory; its errors name the file and
// never quote it.
func ReadCertificateFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read certificate file %s: %w", path, pathCause(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("certificate file %s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read certificate file %s: %w", path, pathCause(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCertFileBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("cannot read certificate file %s: %w", path, pathCause(err))
	case len(data) > maxCertFileBytes:
		return nil, fmt.Errorf("certificate file %s is larger than %d KiB: it is not a certificate (a *-cert.pub file is a few KiB)", path, maxCertFileBytes>>10)
	}
	return data, nil
}

// pathCause drops the path an *os.PathError repeats.
func pathCause(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// certificate parses t's certificate and checks it as ParseCertificate
// does, and that it certifies key when key is not nil. It returns nil when
// t has none; its errors are *CertError.
func (t *Target) certificate(key ssh.PublicKey, now time.Time) (*ssh.Certificate, error) {
	a := &t.Auth
	if len(a.Certificate) == 0 {
		return nil, nil
	}
	cert, err := ParseCertificate(a.Certificate, now)
	var ce *CertError
	if errors.As(err, &ce) {
		ce.Target, ce.Secret, ce.Path = t.Name, a.CertificateSecret, a.CertificatePath
		return nil, ce
	}
	if key != nil && !bytes.Equal(cert.Key.Marshal(), key.Marshal()) {
		return nil, &CertError{Target: t.Name, Secret: a.CertificateSecret, Path: a.CertificatePath, Problem: CertKeyMismatch,
			KeyID: cert.KeyId, Principals: cert.ValidPrincipals, ValidAfter: certTime(cert.ValidAfter), ValidBefore: certTime(cert.ValidBefore),
			Fingerprint: ssh.FingerprintSHA256(cert.Key), KeyFingerprint: ssh.FingerprintSHA256(key), Now: now}
	}
	return cert, nil
}

// certSigner returns the signer that offers cert with the one of signers
// that holds its key, or nil when none does.
func certSigner(cert *ssh.Certificate, signers []ssh.Signer) (ssh.Signer, error) {
	want := cert.Key.Marshal()
	for _, s := range signers {
		if bytes.Equal(s.PublicKey().Marshal(), want) {
			return ssh.NewCertSigner(cert, s)
		}
	}
	return nil, nil
}

// certRefused is the part of an *AuthError about a certificate that was
// offered (or could not be), and what to check.
func certRefused(cert *ssh.Certificate, user string, offered bool) (tried, hint string) {
	fp := ssh.FingerprintSHA256(cert.Key)
	desc := fmt.Sprintf("certificate %s, signed by CA %s", certSummary(cert.KeyId, cert.ValidPrincipals,
		certTime(cert.ValidAfter), certTime(cert.ValidBefore), fp), ssh.FingerprintSHA256(cert.SignatureKey))
	if !offered {
		return "", fmt.Sprintf("the ssh-agent holds no key %s for the %s, so it was not offered: ssh-add the private key it was signed for", fp, desc)
	}
	hint = "check that the server trusts the certificate's CA (TrustedUserCAKeys in sshd_config, or a cert-authority line in authorized_keys)"
	switch {
	case len(cert.ValidPrincipals) == 0:
		hint += fmt.Sprintf("; the certificate names no principal, which sshd refuses with TrustedUserCAKeys: sign it with -n %s", user)
	case !slices.Contains(cert.ValidPrincipals, user):
		hint += fmt.Sprintf("; its principals %s do not include the user %q: sshd accepts it only if AuthorizedPrincipalsFile lists one of them for %s, else sign it with -n %s",
			quoteList(cert.ValidPrincipals), user, user, user)
	default:
		hint += fmt.Sprintf(" and accepts the principal %q (AuthorizedPrincipalsFile, when set, must list it)", user)
	}
	return desc, hint
}

// firstKey is the public key of the first signer, nil when there is none.
func firstKey(signers []ssh.Signer) ssh.PublicKey {
	if len(signers) == 0 {
		return nil
	}
	return signers[0].PublicKey()
}
