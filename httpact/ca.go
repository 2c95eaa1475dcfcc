package httpact

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// LoadCAFile returns a pool of the system roots plus the CA certificates in
// the PEM file at path: an endpoint behind a private or self-signed CA
// then verifies, and one whose certificate moves to a public CA goes on
// verifying. Its errors name the file and never quote its contents: a
// private key given by mistake stays out of logs and results.
func LoadCAFile(path string) (*x509.CertPool, error) {
	certs, keys, err := readCertificates(path)
	switch {
	case err != nil:
		return nil, err
	case keys > 0:
		return nil, fmt.Errorf("%s holds a private key: it must hold only the CA's certificate (-----BEGIN CERTIFICATE-----), which is public; remove the key from the file", path)
	case len(certs) == 0:
		return nil, fmt.Errorf("%s holds no PEM certificate (-----BEGIN CERTIFICATE-----): give the CA certificate that signed the server's certificate, in PEM form", path)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool() // no system roots on this platform
	}
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// readCertificates returns the certificates of the PEM file at path, in
// order, and how many private keys it holds besides. Its errors name the
// file and never quote it.
func readCertificates(path string) (certs []*x509.Certificate, keys int, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the message already
		}
		return nil, 0, fmt.Errorf("cannot read %s: %w", path, err)
	}
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return certs, keys, nil
		}
		switch {
		case b.Type == "CERTIFICATE":
			cert, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, 0, fmt.Errorf("%s: certificate %d does not parse: %w", path, len(certs)+1, err)
			}
			certs = append(certs, cert)
		case strings.Contains(b.Type, "PRIVATE KEY"):
			keys++
		}
	}
}

// unknownAuthority adds what to do to a TLS error about a certificate no
// trusted CA signed.
func unknownAuthority(e *Endpoint, err error) error {
	var ua x509.UnknownAuthorityError
	if !errors.As(err, &ua) {
		return err
	}
	// A *url.Error would print the URL with its query: keep only the cause.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("%w: if the server of endpoint %q has a certificate from a private or self-signed CA, "+
		"set ca_file = \"PATH\" in [http.%s] to a PEM file of that CA's certificate", err, e.Name, e.Name)
}
