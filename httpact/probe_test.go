package httpact

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProbe(t *testing.T) {
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	secure := httptest.NewTLSServer(http.NotFoundHandler())
	defer secure.Close()
	roots := secure.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	c, _ := newTestClient(t)
	ctx := context.Background()
	tests := []struct {
		name string
		e    Endpoint
		want string // "" for success, else a substring of the error
	}{
		{"http", Endpoint{Name: "a", BaseURL: plain.URL, AllowPrivate: true}, ""},
		{"https with its CA", Endpoint{Name: "b", BaseURL: secure.URL + "/api", AllowPrivate: true, RootCAs: roots}, ""},
		{"https with an unknown CA", Endpoint{Name: "c", BaseURL: secure.URL, AllowPrivate: true}, `set ca_file = "PATH" in [http.c]`},
		{"loopback without opt-in", Endpoint{Name: "d", BaseURL: plain.URL}, "loopback"},
		{"nothing listening", Endpoint{Name: "e", BaseURL: closed.URL, AllowPrivate: true}, "connect to"},
		{"invalid endpoint", Endpoint{Name: "f", BaseURL: "ftp://x"}, "base_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Probe(ctx, &tt.e)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Probe = %v; want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Probe = %v; want an error containing %q", err, tt.want)
			}
		})
	}
	var blocked *BlockedAddressError
	if err := c.Probe(ctx, &Endpoint{Name: "g", BaseURL: plain.URL}); !errors.As(err, &blocked) {
		t.Errorf("Probe of loopback without opt-in = %v; want a *BlockedAddressError", err)
	}
}
