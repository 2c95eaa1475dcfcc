package httpact

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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

// TestProbeToken fetches a client-credentials token from a real token
// endpoint: the right secret passes; a refused one fails with the status
// and error code only, never the secret the server echoed; the endpoint
// itself is never called.
func TestProbeToken(t *testing.T) {
	const secret = "client-secret-7d1e"
	tokens := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, got, _ := r.BasicAuth()
		if r.FormValue("grant_type") != "client_credentials" || id != "id" || got != secret {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			// A hostile or careless server echoes what it was sent.
			fmt.Fprintf(w, `{"error":"invalid_client","error_description":"bad secret %s"}`, got)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"access-%s","token_type":"Bearer","expires_in":60}`, testToken)
	}))
	defer tokens.Close()
	roots := tokens.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	api := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Errorf("the endpoint was called") }))
	defer api.Close()

	endpoint := func(kind, secret string, allowPrivate bool) *Endpoint {
		e := testEndpoint(api, Auth{Kind: kind, OAuth2: &OAuth2{TokenURL: tokens.URL, ClientID: "id", ClientSecret: []byte(secret),
			RefreshToken: []byte("refresh-token"), OnToken: func([]byte, time.Time) error { return nil },
			OnRefreshToken: func(context.Context, []byte) error { t.Error("a refresh token was used"); return nil }}})
		e.AllowPrivate, e.RootCAs = allowPrivate, roots
		return e
	}
	tests := []struct {
		name string
		e    *Endpoint
		want string // "" for success, else a substring of the error
	}{
		{"right secret", endpoint(AuthOAuth2ClientCredentials, secret, true), ""},
		{"refused secret", endpoint(AuthOAuth2ClientCredentials, "wrong-"+secret, true), "the token endpoint answered HTTP 401 invalid_client"},
		{"token endpoint on loopback without opt-in", endpoint(AuthOAuth2ClientCredentials, secret, false), "loopback"},
		{"plain http token URL", func() *Endpoint {
			e := endpoint(AuthOAuth2ClientCredentials, secret, false)
			e.Auth.OAuth2.TokenURL = strings.Replace(tokens.URL, "https:", "http:", 1)
			return e
		}(), "token_url: must start with https://"},
		{"refresh token", endpoint(AuthOAuth2RefreshToken, secret, true), "only oauth2_client_credentials"},
		{"no redactor told", func() *Endpoint {
			e := endpoint(AuthOAuth2ClientCredentials, secret, true)
			e.Auth.OAuth2.OnToken = nil
			return e
		}(), "no redactor is told of the access tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, logs := newTestClient(t)
			err := c.ProbeToken(context.Background(), tt.e)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("ProbeToken = %v; want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("ProbeToken = %v; want an error containing %q", err, tt.want)
			}
			if err != nil {
				for _, s := range []string{secret, "bad secret", testToken} {
					if strings.Contains(err.Error(), s) || strings.Contains(logs.String(), s) {
						t.Errorf("error %q or logs hold %q", err, s)
					}
				}
			}
		})
	}
}
