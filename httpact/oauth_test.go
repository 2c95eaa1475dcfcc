package httpact

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCheckTokenURL(t *testing.T) {
	tests := []struct {
		url          string
		allowPrivate bool
		want         string // "" for no error, else part of it
	}{
		{"https://auth.example/oauth/token", false, ""},
		{"https://127.0.0.1:8443/token", false, ""}, // the guard decides at the dial
		{"http://127.0.0.1:8080/token", true, ""},
		{"http://[::1]:8080/token", true, ""},
		{"http://localhost:8080/token", true, ""},
		{"http://127.0.0.1:8080/token", false, "https://"},
		{"http://auth.example/token", true, "https://"},
		{"http://10.0.0.5/token", true, "https://"},
		{"ftp://auth.example/token", false, "https://"},
		{"https://u:p@auth.example/token", false, "userinfo"},
		{"https://auth.example/token?a=b", false, "query"},
		{"https://auth.example/token#x", false, "fragment"},
		{"https:///token", false, "host"},
		{"", false, "required"},
	}
	for _, tt := range tests {
		err := CheckTokenURL(tt.url, tt.allowPrivate)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckTokenURL(%q, %v) = %v; want nil", tt.url, tt.allowPrivate, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("CheckTokenURL(%q, %v) = %v; want an error with %q", tt.url, tt.allowPrivate, err, tt.want)
		}
	}
}

// TestOAuth2Expiry moves the Client's clock: a token is reused until
// shortly before its expiry, then fetched again.
func TestOAuth2Expiry(t *testing.T) {
	var mu sync.Mutex
	fetches, current := 0, ""
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fetches++
		current = fmt.Sprintf("access-%d-%s", fetches, testToken)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":100}`, current)
	}))
	defer tokens.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+current {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer api.Close()

	c, logs := newTestClient(t)
	now := time.Now()
	c.now = func() time.Time { return now }
	var learned []string
	e := testEndpoint(api, Auth{Kind: AuthOAuth2ClientCredentials, OAuth2: &OAuth2{
		TokenURL: tokens.URL, ClientID: "id", ClientSecret: []byte("client-secret"),
		OnToken: func(tok []byte, _ time.Time) error { learned = append(learned, string(tok)); return nil },
	}})
	tests := []struct {
		name        string
		advance     time.Duration
		wantFetches int
	}{
		{"first", 0, 1},
		{"fresh", 60 * time.Second, 1},
		{"within the margin of its expiry", 31 * time.Second, 2}, // 91 s of 100
		{"the new one is fresh", 0, 2},
	}
	for _, tt := range tests {
		now = now.Add(tt.advance)
		res, err := c.Do(context.Background(), e, Request{Method: "GET", Path: "/x"}, nil)
		if err != nil || res.HTTPStatus != 200 {
			t.Fatalf("%s: %v %+v", tt.name, err, res)
		}
		checkNoSecret(t, logs, res)
		mu.Lock()
		got := fetches
		mu.Unlock()
		if got != tt.wantFetches || len(learned) != got {
			t.Errorf("%s: %d fetches, %d tokens learned; want %d", tt.name, got, len(learned), tt.wantFetches)
		}
	}
}

func TestOAuth2Refused(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the API was called")
	}))
	defer api.Close()
	c, _ := newTestClient(t)
	o := func(mod func(*OAuth2)) Auth {
		a := &OAuth2{TokenURL: "http://127.0.0.1:1/token", ClientID: "id", ClientSecret: []byte("client-secret"),
			OnToken: func([]byte, time.Time) error { return nil }}
		mod(a)
		return Auth{Kind: AuthOAuth2ClientCredentials, OAuth2: a}
	}
	tests := []struct {
		name  string
		auth  Auth
		field string
	}{
		{"no redactor told", o(func(a *OAuth2) { a.OnToken = nil }), "auth"},
		{"no client secret", o(func(a *OAuth2) { a.ClientSecret = nil }), "auth"},
		{"no settings", Auth{Kind: AuthOAuth2ClientCredentials}, "auth"},
		{"bad scope", o(func(a *OAuth2) { a.Scopes = []string{"a b"} }), "scopes"},
		{"no client id", o(func(a *OAuth2) { a.ClientID = "" }), "client_id"},
		{"plain http off loopback", o(func(a *OAuth2) { a.TokenURL = "http://auth.example/token" }), "token_url"},
		{"settings on bearer", Auth{Kind: AuthBearer, Token: []byte(testToken), OAuth2: &OAuth2{}}, "auth"},
		{"refresh kind without its hook", Auth{Kind: AuthOAuth2RefreshToken, OAuth2: &OAuth2{TokenURL: "https://a.example/t", ClientID: "id",
			RefreshToken: []byte("refresh-token"), OnToken: func([]byte, time.Time) error { return nil }}}, "auth"},
	}
	for _, tt := range tests {
		_, err := c.Do(context.Background(), testEndpoint(api, tt.auth), Request{Method: "GET", Path: "/x"}, nil)
		var ee *EndpointError
		if !errors.As(err, &ee) || ee.Field != tt.field {
			t.Errorf("%s: %v; want an *EndpointError on %s", tt.name, err, tt.field)
		}
	}
}
