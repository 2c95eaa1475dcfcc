package httpact

import (
	"context"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/actiongw/actiongw/internal/testkit/tlstest"
)

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadCAFile(t *testing.T) {
	ca, other := tlstest.NewCA(t, "a"), tlstest.NewCA(t, "b")
	garbage := []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n")
	tests := []struct {
		name   string
		data   []byte // nil: no file
		want   string // "" for success, else a substring of the error
		secret []byte // must not appear in the error
	}{
		{"one CA", ca.PEM(), "", nil},
		{"two CAs", append(append([]byte{}, ca.PEM()...), other.PEM()...), "", nil},
		{"missing file", nil, "cannot read", nil},
		{"not PEM", []byte("ghp_0123456789abcdefghijklmnopqrstuvwxyz\n"), "holds no PEM certificate", []byte("ghp_0123")},
		{"private key only", ca.KeyPEM(), "holds a private key", ca.KeyPEM()[40:80]},
		{"certificate and its key", append(append([]byte{}, ca.PEM()...), ca.KeyPEM()...), "holds a private key", ca.KeyPEM()[40:80]},
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
	caA, caB := tlstest.NewCA(t, "a"), tlstest.NewCA(t, "b")
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })
	srvA, srvB := caA.Server(t, hello, tlstest.ServerOptions{}), caB.Server(t, hello, tlstest.ServerOptions{})
	poolA, err := LoadCAFile(writeFile(t, "a.pem", caA.PEM()))
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
