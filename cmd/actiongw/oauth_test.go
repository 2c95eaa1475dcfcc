//go:build linux

package main

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/actiongw/actiongw/gateway"
)

// TestServeOAuth2 runs an OAuth2 client credentials endpoint through
// `actiongw serve` with the real keyring: the token is fetched once, the
// API's echo of it comes back redacted, and no access token or client
// secret reaches the host, stderr or the state directory.
func TestServeOAuth2(t *testing.T) {
	clientSecret := "cs-" + randomHex(t, 12) // the keyring's api-token item
	var (
		mu      sync.Mutex
		fetches int
		issued  []string
	)
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fetches++
		r.ParseForm()
		if id, secret, ok := r.BasicAuth(); !ok || id != "actiongw" || secret != clientSecret || r.PostForm.Get("grant_type") != "client_credentials" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		issued = append(issued, "at-"+rand.Text())
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": issued[len(issued)-1], "token_type": "Bearer", "expires_in": 3600})
	}))
	defer tokens.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "echo:"+r.Header.Get("Authorization"))
		fmt.Fprintf(w, "auth=%s\n", r.Header.Get("Authorization"))
	}))
	defer api.Close()

	s := startServedWith(t, servedOptions{token: clientSecret, tables: fmt.Sprintf(`
[http.oauth]
base_url = %q
allow_private = true
auth = "oauth2_client_credentials"
token_url = %q
client_id = "actiongw"
client_secret_secret = "api-token"
`, api.URL, tokens.URL+"/token")})
	const want = "Bearer [REDACTED:oauth.access_token]"
	for i := range 2 {
		r := s.call(t, "http_request", map[string]any{"endpoint": "oauth", "method": "GET", "path": "/x"})
		out := decode[gateway.HTTPRequestOutput](t, r)
		if r.IsError || out.HTTPStatus != 200 || out.Body.Head != "auth="+want+"\n" || out.Headers["x-request-id"] != "echo:"+want {
			t.Errorf("call %d: %s; want 200 with the echoed token redacted", i, resultText(r))
		}
	}
	mu.Lock()
	if fetches != 1 {
		t.Errorf("%d token requests; want 1 (the token reused)", fetches)
	}
	secrets := append([]string{clientSecret}, issued...)
	mu.Unlock()
	s.client.Close()
	for _, secret := range secrets {
		s.assertNoSecretIn(t, secret)
	}
}
