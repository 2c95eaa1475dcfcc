package httpact

import (
	"context"
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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA is a private CA that signs one server certificate for 127.0.0.1,
// and client certificates (newClient).
type testCA struct {
	certPEM []byte
	keyPEM  []byte // the CA's private key, for the file that must be refused
	server  tls.Certificate
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, srvKey := newKey(), newKey()
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "server of " + name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(caKey)
	return &testCA{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		server:  tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey},
		cert:    caCert,
		key:     caKey,
	}
}

// serve starts an HTTPS server with the CA's server certificate.
func (ca *testCA) serve(t *testing.T) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.server}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadCAFile(t *testing.T) {
	ca, other := newTestCA(t, "a"), newTestCA(t, "b")
	garbage := []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n")
	tests := []struct {
		name   string
		data   []byte // nil: no file
		want   string // "" for success, else a substring of the error
		secret []byte // must not appear in the error
	}{
		{"one CA", ca.certPEM, "", nil},
		{"two CAs", append(append([]byte{}, ca.certPEM...), other.certPEM...), "", nil},
		{"missing file", nil, "cannot read", nil},
		{"not PEM", []byte("ghp_0123456789abcdefghijklmnopqrstuvwxyz\n"), "holds no PEM certificate", []byte("ghp_0123")},
		{"private key only", ca.keyPEM, "holds a private key", ca.keyPEM[40:80]},
		{"certificate and its key", append(append([]byte{}, ca.certPEM...), ca.keyPEM...), "holds a private key", ca.keyPEM[40:80]},
		{"broken certificate", garbage, "certificate 1 does not parse", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "none.pem")
			if tt.data != nil {
				path = writeFile(t, "ca.pem", tt.data)
			}
			pool, err := LoadCAFile(path)
			switch {
			case tt.want == "" && (err != nil || pool == nil):
				t.Fatalf("LoadCAFile = %v, %v; want a pool", pool, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path)):
				t.Fatalf("LoadCAFile = %v; want an error naming %s and containing %q", err, path, tt.want)
			case err != nil && tt.secret != nil && strings.Contains(err.Error(), string(tt.secret)):
				t.Fatalf("LoadCAFile error %q quotes the file", err)
			}
		})
	}
}

// TestCAFileIsPerEndpoint checks that an endpoint's CA applies to its own
// connections only, though one Client serves them all: a config that adds a
// CA to one endpoint must not make another trust it.
func TestCAFileIsPerEndpoint(t *testing.T) {
	caA, caB := newTestCA(t, "a"), newTestCA(t, "b")
	srvA, srvB := caA.serve(t), caB.serve(t)
	poolA, err := LoadCAFile(writeFile(t, "a.pem", caA.certPEM))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := newTestClient(t)
	ctx := context.Background()
	endpoint := func(name string, srv *httptest.Server, roots *x509.CertPool) *Endpoint {
		return &Endpoint{Name: name, BaseURL: srv.URL, AllowPrivate: true, RootCAs: roots}
	}
	tests := []struct {
		name string
		e    *Endpoint
		ok   bool
	}{
		{"with its CA", endpoint("trusting", srvA, poolA), true},
		// After the trusting endpoint has an open connection to srvA.
		{"same server, no ca_file", endpoint("plain", srvA, nil), false},
		{"another CA's server with ca_file", endpoint("trusting-b", srvB, poolA), false},
		{"with its CA again", endpoint("trusting", srvA, poolA), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := c.Do(ctx, tt.e, Request{Method: "GET"}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if tt.ok {
				if res.Status != StatusOK {
					t.Fatalf("got %s (%s); want ok", res.Status, res.Reason)
				}
				return
			}
			if res.Status != StatusFailed || !strings.Contains(res.Reason, "unknown authority") ||
				!strings.Contains(res.Reason, `set ca_file = "PATH" in [http.`+tt.e.Name+`]`) {
				t.Fatalf("got %s (%s); want failed, unknown authority, with the ca_file hint", res.Status, res.Reason)
			}
			perr := c.Probe(ctx, tt.e)
			if perr == nil || !strings.Contains(perr.Error(), "set ca_file") {
				t.Fatalf("Probe = %v; want the ca_file hint", perr)
			}
		})
	}
}
