package httpact

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/actiongw/actiongw/internal/testkit/tlstest"
)

// peers records, per request, the common name of the client certificate
// the server verified ("" for none).
type peers struct {
	mu  sync.Mutex
	cns []string
}

func (p *peers) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.cns...)
}

// serveMutual starts an HTTPS server with a certificate from ca that
// verifies client certificates against ca, as auth demands, and answers
// with the client's common name.
func serveMutual(t *testing.T, ca *tlstest.CA, auth tls.ClientAuthType) (*httptest.Server, *peers) {
	t.Helper()
	p := &peers{}
	srv := ca.Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cn := ""
		if len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		p.mu.Lock()
		p.cns = append(p.cns, cn)
		p.mu.Unlock()
		io.WriteString(w, "client="+cn)
	}), tlstest.ServerOptions{ClientAuth: auth})
	return srv, p
}

func TestLoadClientCert(t *testing.T) {
	ca := tlstest.NewCA(t, "a")
	certPEM, keyPEM := ca.Client(t, "agent")
	_, otherKey := ca.Client(t, "other")
	serverOnly, serverOnlyKey := ca.ServerCert(t)
	cat := func(b ...[]byte) []byte { return bytes.Join(b, nil) }
	// A line of each key's base64: what a leak would show.
	secrets := [][]byte{keyPEM[40:80], otherKey[40:80], serverOnlyKey[40:80]}
	tests := []struct {
		name   string
		cert   []byte // the file; nil: no file
		key    []byte
		fileOK bool   // CheckClientCertFile accepts the file
		want   string // "" for success, else a substring of the error
	}{
		{"pair", certPEM, keyPEM, true, ""},
		{"chain with the CA", cat(certPEM, ca.PEM()), keyPEM, true, ""},
		{"missing file", nil, keyPEM, false, "cannot read"},
		{"file holds the key", keyPEM, keyPEM, false, "holds a private key"},
		{"file holds certificate and key", cat(certPEM, keyPEM), keyPEM, false, "holds a private key"},
		{"file is not PEM", []byte("not a certificate\n"), keyPEM, false, "holds no PEM certificate"},
		{"server certificate", serverOnly, serverOnlyKey, false, "not for client authentication"},
		{"another key", certPEM, otherKey, true, `and the private key in keyring item "client-key" are not a pair`},
		{"certificate stored as the key", certPEM, certPEM, true, `keyring item "client-key" holds no PEM private key`},
		{"token stored as the key", certPEM, []byte("ghp_0123456789abcdefghijklmnopqrstuvwxyz"), true, "holds no PEM private key"},
		{"key that does not parse", certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("garbage-garbage-garbage")}), true, "are not a pair"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := t.TempDir() + "/none.pem"
			if tt.cert != nil {
				path = writeFile(t, "client.pem", tt.cert)
			}
			if err := CheckClientCertFile(path); (err == nil) != tt.fileOK {
				t.Errorf("CheckClientCertFile = %v; want success %v", err, tt.fileOK)
			}
			got, err := LoadClientCert(path, tt.key, "client-key")
			if tt.want == "" {
				if err != nil || got == nil || got.Leaf == nil || got.Leaf.Subject.CommonName != "agent" {
					t.Fatalf("LoadClientCert = %v, %v; want the pair for agent", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("LoadClientCert = %v; want an error naming %s and containing %q", err, path, tt.want)
			}
			for _, s := range secrets {
				if strings.Contains(err.Error(), string(s)) {
					t.Fatalf("LoadClientCert error %q quotes a private key", err)
				}
			}
		})
	}
}

// TestMutualTLS runs requests against a server that requires a client
// certificate its CA signed: the endpoint's own certificate gets in; no
// certificate, or one of another CA, fails with what to do, from Do and
// from Probe alike.
func TestMutualTLS(t *testing.T) {
	ca, stranger := tlstest.NewCA(t, "a"), tlstest.NewCA(t, "stranger")
	srv, seen := serveMutual(t, ca, tls.RequireAndVerifyClientCert)
	roots, err := LoadCAFile(writeFile(t, "ca.pem", ca.PEM()))
	if err != nil {
		t.Fatal(err)
	}
	load := func(ca *tlstest.CA, cn string) *tls.Certificate {
		certPEM, keyPEM := ca.Client(t, cn)
		c, err := LoadClientCert(writeFile(t, "client.pem", certPEM), keyPEM, "client-key")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	agent, strangerCert := load(ca, "agent"), load(stranger, "stranger")
	c, logs := newTestClient(t)
	ctx := context.Background()
	tests := []struct {
		name string
		cert *tls.Certificate
		want string // the body, or a substring of the reason of a failure
	}{
		{"its certificate", agent, "client=agent"},
		{"no certificate", nil, `set client_cert = "PATH" and client_key_secret = "NAME" in [http.no]`},
		{"another CA's certificate", strangerCert, "refused its client certificate (client_cert in [http.another])"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &Endpoint{Name: strings.Fields(tt.name)[0], BaseURL: srv.URL, AllowPrivate: true, RootCAs: roots, ClientCert: tt.cert}
			var body bytes.Buffer
			res, err := c.Do(ctx, e, Request{Method: "GET"}, &body)
			if err != nil {
				t.Fatal(err)
			}
			if tt.cert == agent {
				if res.Status != StatusOK || body.String() != tt.want {
					t.Fatalf("got %s %q (%s); want ok %q", res.Status, body.String(), res.Reason, tt.want)
				}
				if err := c.Probe(ctx, e); err != nil {
					t.Errorf("Probe = %v; want success", err)
				}
				return
			}
			if res.Status != StatusFailed || !strings.Contains(res.Reason, tt.want) {
				t.Fatalf("got %s (%s); want failed with %q", res.Status, res.Reason, tt.want)
			}
		})
	}
	if got, want := fmt.Sprint(seen.all()), "[agent]"; got != want {
		t.Errorf("the server saw clients %s; want %s", got, want)
	}
	if strings.Contains(logs.String(), "PRIVATE KEY") {
		t.Errorf("the logs hold a private key:\n%s", logs)
	}
}

// TestClientCertNotShared checks that a connection made with one client
// identity never carries a request of another: endpoints on one origin
// with and without a certificate, and one endpoint whose certificate a
// reload changed. The server records the identity of each request's
// connection.
func TestClientCertNotShared(t *testing.T) {
	ca := tlstest.NewCA(t, "a")
	srv, seen := serveMutual(t, ca, tls.VerifyClientCertIfGiven)
	roots, err := LoadCAFile(writeFile(t, "ca.pem", ca.PEM()))
	if err != nil {
		t.Fatal(err)
	}
	load := func(cn string) *tls.Certificate {
		certPEM, keyPEM := ca.Client(t, cn)
		c, err := LoadClientCert(writeFile(t, "client.pem", certPEM), keyPEM, "client-key")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first, second := load("first"), load("second")
	c, _ := newTestClient(t)
	endpoint := func(name string, cert *tls.Certificate) *Endpoint {
		return &Endpoint{Name: name, BaseURL: srv.URL, AllowPrivate: true, RootCAs: roots, ClientCert: cert}
	}
	// Each request leaves its connection idle for the next to reuse.
	calls := []*Endpoint{
		endpoint("mtls", first), endpoint("plain", nil), endpoint("mtls", first), endpoint("plain", nil),
		endpoint("mtls", second), // reloaded with another certificate
		endpoint("mtls", nil),    // and then with none
		endpoint("plain", nil),
	}
	for _, e := range calls {
		res, err := c.Do(context.Background(), e, Request{Method: "GET"}, io.Discard)
		if err != nil || res.Status != StatusOK {
			t.Fatalf("%s: %v %v", e.Name, res, err)
		}
	}
	if got, want := fmt.Sprintf("%q", seen.all()), `["first" "" "first" "" "second" "" ""]`; got != want {
		t.Errorf("the server saw clients %s; want %s", got, want)
	}
}
