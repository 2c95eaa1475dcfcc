package config

import (
	"errors"
	"time"

	"github.com/actiongw/actiongw/sshexec"
)

// checkCertificate checks a target's certificate or certificate_secret:
// at most one, with a key to pair it with, and a file that holds a user
// certificate. Whether it is valid now and certifies the key is checked
// when the target is built with its key (sshexec.Target.Validate). Principals are
// not checked against the user: sshd may map them (AuthorizedPrincipalsFile).
func checkCertificate(f string, t *SSHTarget) []error {
	var errs []error
	bad := func(field, reason string) { errs = append(errs, &FieldError{Field: f + field, Reason: reason}) }
	field := ".certificate"
	if t.CertificateSecret != "" {
		field = ".certificate_secret"
	}
	switch {
	case t.Certificate != "" && t.CertificateSecret != "":
		bad("", "set at most one of certificate or certificate_secret")
	case t.Certificate == "" && t.CertificateSecret == "":
		return nil
	case t.KeySecret == "" && !t.Agent:
		bad(field, "needs the certificate's private key: key_secret, or agent = true with the key in the ssh-agent")
	}
	errs = append(errs, checkSecretNames(f, map[string]string{"certificate_secret": t.CertificateSecret})...)
	if t.Certificate == "" {
		return errs
	}
	if looksInline(t.Certificate) {
		bad(".certificate", "must be the path of a *-cert.pub file, and a private key belongs in the keyring (`actiongw secret set NAME`, then key_secret = \"NAME\")")
		return errs
	}
	data, err := sshexec.ReadCertificateFile(t.Certificate)
	if err == nil {
		_, err = sshexec.ParseCertificate(data, time.Now())
	}
	var ce *sshexec.CertError
	if errors.As(err, &ce) {
		ce.Path = t.Certificate
		// A certificate that expires is the target's problem, reported
		// when it is built (and by actiongw check), not a config that no
		// longer loads.
		if ce.Problem == sshexec.CertExpired || ce.Problem == sshexec.CertNotYetValid {
			err = nil
		}
	}
	if err != nil {
		bad(".certificate", err.Error())
	}
	return errs
}
