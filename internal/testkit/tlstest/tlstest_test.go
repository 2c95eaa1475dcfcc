package tlstest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestServer connects to servers a CA started, by address and by name,
// with and without client certificates: only what the CA signed, for the
// names it signed, gets in.
func TestServer(t *testing.T) {
	ca, other := NewCA(t, "test CA"), NewCA(t, "other CA")
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cn := "none"
		if len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		io.WriteString(w, "client="+cn)
	})
	plain := ca.Server(t, hello, ServerOptions{Names: []string{"api.example"}})
	mutual := ca.Server(t, hello, ServerOptions{ClientAuth: tls.RequireAndVerifyClientCert})
	pair := func(ca *CA, name string) *tls.Certificate {
		c, err := tls.X509KeyPair(ca.Client(t, name))
		if err != nil {
			t.Fatal(err)
		}
		return &c
	}
	tests := []struct {
		name  string
		srv   string // the server's address
		host  string // the name dialled: what the certificate must be for
		roots *x509.CertPool
		cert  *tls.Certificate // sent whatever CAs the server names
		want  string           // the body, or part of the error
	}{
		{"by address", plain.Listener.Addr().String(), "127.0.0.1", ca.Pool(), nil, "client=none"},
		{"localhost", plain.Listener.Addr().String(), "localhost", ca.Pool(), nil, "client=none"},
		{"a name in Names", plain.Listener.Addr().String(), "api.example", ca.Pool(), nil, "client=none"},
		{"another name", plain.Listener.Addr().String(), "other.example", ca.Pool(), nil, "not other.example"},
		{"another CA's pool", plain.Listener.Addr().String(), "127.0.0.1", other.Pool(), nil, "unknown authority"},
		{"system roots", plain.Listener.Addr().String(), "127.0.0.1", nil, nil, "unknown authority"},
		{"its client certificate", mutual.Listener.Addr().String(), "127.0.0.1", ca.Pool(), pair(ca, "agent"), "client=agent"},
		{"no client certificate", mutual.Listener.Addr().String(), "127.0.0.1", ca.Pool(), nil, "certificate required"},
		{"another CA's client certificate", mutual.Listener.Addr().String(), "127.0.0.1", ca.Pool(), pair(other, "agent"), "unknown certificate authority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &http.Transport{
				DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, network, tt.srv)
				},
				TLSClientConfig: &tls.Config{RootCAs: tt.roots},
			}
			if tt.cert != nil {
				tr.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return tt.cert, nil }
			}
			defer tr.CloseIdleConnections()
			res, err := (&http.Client{Transport: tr}).Get("https://" + tt.host + "/")
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				got = string(b)
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}

// TestServerCert checks the usages of what a CA signs: a client
// certificate for client authentication, a server certificate for server
// authentication only, both chains to the CA.
func TestServerCert(t *testing.T) {
	ca := NewCA(t, "test CA")
	clientPEM, _ := ca.Client(t, "agent")
	serverPEM, _ := ca.ServerCert(t)
	for _, tt := range []struct {
		name  string
		pem   []byte
		usage x509.ExtKeyUsage
	}{{"client", clientPEM, x509.ExtKeyUsageClientAuth}, {"server", serverPEM, x509.ExtKeyUsageServerAuth}} {
		block, _ := pem.Decode(tt.pem)
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if got := cert.ExtKeyUsage; len(got) != 1 || got[0] != tt.usage {
			t.Errorf("%s: extended key usage %v; want only %v", tt.name, got, tt.usage)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{tt.usage}}); err != nil {
			t.Errorf("%s: %v; want a chain to the CA", tt.name, err)
		}
	}
}
