package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// CA is a private certificate authority a test made: no system trusts it.
type CA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	pem    []byte
	keyPEM []byte
}

// NewCA makes a CA whose certificate has the common name name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := template(t, name)
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{cert: cert, key: key,
		pem:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})}
}

// PEM returns the CA's certificate, PEM: what a ca_file holds.
func (ca *CA) PEM() []byte { return ca.pem }

// KeyPEM returns the CA's private key, PEM in SEC 1 form ("EC PRIVATE
// KEY"): a file a test must see refused where a certificate belongs.
func (ca *CA) KeyPEM() []byte { return ca.keyPEM }

// Pool returns a new pool that holds the CA's certificate alone.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return pool
}

// Client returns a certificate for client authentication that the CA
// signed, with the common name name, and its private key (PKCS #8), PEM.
func (ca *CA) Client(t testing.TB, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	tmpl := template(t, name)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return ca.sign(t, tmpl)
}

// ServerCert returns a certificate for server authentication only that
// the CA signed, for 127.0.0.1, localhost and names, and its private key
// (PKCS #8), PEM.
func (ca *CA) ServerCert(t testing.TB, names ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	tmpl := template(t, "server")
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	tmpl.DNSNames = append([]string{"localhost"}, names...)
	return ca.sign(t, tmpl)
}

// ServerOptions says how Server differs from a plain HTTPS server on
// 127.0.0.1.
type ServerOptions struct {
	// Names are DNS names the server's certificate is for besides
	// 127.0.0.1 and localhost; nil: none.
	Names []string
	// ClientAuth is what the server asks of clients' certificates, which
	// it verifies against the CA alone; zero (tls.NoClientCert): nothing.
	ClientAuth tls.ClientAuthType
	// Addr is the address the server listens on; "": 127.0.0.1 on a free
	// port.
	Addr string
}

// Server starts an HTTPS server with handler and a certificate from
// ServerCert, closed when the test ends. Its error log is discarded: the
// handshakes tests make it refuse would print there.
func (ca *CA) Server(t testing.TB, handler http.Handler, opts ServerOptions) *httptest.Server {
	t.Helper()
	pair, err := tls.X509KeyPair(ca.ServerCert(t, opts.Names...))
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if opts.Addr != "" {
		if ln, err = net.Listen("tcp", opts.Addr); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewUnstartedServer(handler)
	if ln != nil {
		srv.Listener.Close()
		srv.Listener = ln
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: opts.ClientAuth, ClientCAs: ca.Pool()}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// sign returns the certificate for tmpl, signed by the CA, for a new key,
// and the key, PEM.
func (ca *CA) sign(t testing.TB, tmpl *x509.Certificate) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// template returns a certificate for the common name name, valid from an
// hour ago to an hour from now, with a random serial number.
func template(t testing.TB, name string) *x509.Certificate {
	t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	return &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
