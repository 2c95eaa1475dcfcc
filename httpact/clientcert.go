package httpact

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
)

// CheckClientCertFile checks that the PEM file at path holds a client
// certificate (the leaf first, then any intermediates) and no private key:
// what loading the config can verify before the key is read from the
// keyring. Its errors name the file and never quote it.
func CheckClientCertFile(path string) error {
	_, err := clientChain(path)
	return err
}

// clientChain returns the certificates of the client certificate file at
// path, the leaf first.
func clientChain(path string) ([]*x509.Certificate, error) {
	certs, keys, err := readCertificates(path)
	switch {
	case err != nil:
		return nil, err
	case keys > 0:
		return nil, fmt.Errorf("%s holds a private key: it must hold only the client certificate (-----BEGIN CERTIFICATE-----), which is public; "+
			"store the key in the keyring (actiongw secret set NAME < KEYFILE), name it in client_key_secret and remove it from the file", path)
	case len(certs) == 0:
		return nil, fmt.Errorf("%s holds no PEM certificate (-----BEGIN CERTIFICATE-----): give the client certificate, in PEM form", path)
	}
	if eku := certs[0].ExtKeyUsage; len(eku) > 0 &&
		!slices.Contains(eku, x509.ExtKeyUsageClientAuth) && !slices.Contains(eku, x509.ExtKeyUsageAny) {
		return nil, fmt.Errorf("%s: the first certificate is not for client authentication (its extended key usage lacks clientAuth): a server would refuse it", path)
	}
	return certs, nil
}

// LoadClientCert pairs the client certificate file at certPath (see
// CheckClientCertFile) with key, the PEM private key (PKCS #1, PKCS #8 or
// SEC 1, unencrypted) from the keyring item keyName, which the errors name:
// they never quote the key or the file.
func LoadClientCert(certPath string, key []byte, keyName string) (*tls.Certificate, error) {
	certs, err := clientChain(certPath)
	if err != nil {
		return nil, err
	}
	if !holdsPrivateKey(key) {
		return nil, fmt.Errorf("keyring item %q holds no PEM private key (-----BEGIN PRIVATE KEY-----); store the key of %s with: actiongw secret set %s < KEYFILE",
			keyName, certPath, keyName)
	}
	var chain []byte
	for _, c := range certs {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	// tls's errors here name types and kinds of keys, never their bytes.
	pair, err := tls.X509KeyPair(chain, key)
	if err != nil {
		return nil, fmt.Errorf("the certificate in %s and the private key in keyring item %q are not a pair (%v); store the key of that certificate with: actiongw secret set %s < KEYFILE",
			certPath, keyName, err, keyName)
	}
	return &pair, nil
}

// holdsPrivateKey reports whether key has a PEM block of a private key.
func holdsPrivateKey(key []byte) bool {
	for rest := key; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return false
		}
		if b.Type == "PRIVATE KEY" || strings.HasSuffix(b.Type, " PRIVATE KEY") {
			return true
		}
	}
}

// certificateAlerts are the texts of the TLS alerts by which a server
// refuses a client certificate, or its absence. crypto/tls keeps the
// alert type unexported: a received alert is a *net.OpError "remote
// error" around it, known only by its text.
var certificateAlerts = []string{
	"tls: certificate required", "tls: bad certificate", "tls: unknown certificate authority",
	"tls: expired certificate", "tls: revoked certificate", "tls: unknown certificate",
	"tls: unsupported certificate", "tls: access denied",
}

// refusedClientCert adds what to do to a server's TLS alert about the
// client certificate, sent or missing.
func refusedClientCert(e *Endpoint, err error) error {
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "remote error" || !slices.Contains(certificateAlerts, oe.Err.Error()) {
		return err
	}
	// A *url.Error would print the URL with its query: keep only the cause.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if e.ClientCert == nil {
		return fmt.Errorf("%w: the server of endpoint %q asks for a client certificate (mutual TLS); "+
			"set client_cert = \"PATH\" and client_key_secret = \"NAME\" in [http.%s]", err, e.Name, e.Name)
	}
	return fmt.Errorf("%w: the server of endpoint %q refused its client certificate (client_cert in [http.%s]): "+
		"check that a CA the server trusts signed it and that it has not expired", err, e.Name, e.Name)
}

// tlsConfig is the TLS configuration of e's connections.
func (e *Endpoint) tlsConfig() *tls.Config {
	cfg := &tls.Config{RootCAs: e.RootCAs, MinVersion: tls.VersionTLS12}
	if cert := e.ClientCert; cert != nil {
		// Certificates would send nothing to a server whose request names
		// CAs that did not sign it, and the server would then report a
		// missing certificate; sent anyway, it reports which it refused.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return cfg
}

// tlsHint adds what to do to a TLS error the configuration can fix.
func tlsHint(e *Endpoint, err error) error {
	return refusedClientCert(e, unknownAuthority(e, err))
}
