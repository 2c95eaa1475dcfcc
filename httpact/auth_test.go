package httpact

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// sampleAuth is a valid credential of every kind's settings at once: each
// row reads the fields it uses.
func sampleAuth(kind AuthKind) Auth {
	a := Auth{Kind: kind.Name, Token: []byte(testToken), User: []byte("deploy"), Password: []byte(testToken),
		Header: "X-Api-Key", Param: "api_key"}
	if kind.OAuth2 {
		a.OAuth2 = &OAuth2{TokenURL: "https://auth.example/token", ClientID: "actiongw", Scopes: []string{"read"},
			ClientSecret: []byte(testToken), RefreshToken: []byte(testToken),
			OnToken:        func([]byte, time.Time) error { return nil },
			OnRefreshToken: func(_ context.Context, _ []byte) error { return nil }}
	}
	return a
}

// TestAuthKindRows holds every row of the table to what the code that
// reads it relies on: a row that sends a credential says where, checks
// the values before they are sent, and refuses the agent that place; an
// OAuth2 row sends its token in a header (Do sets it once the URL is
// built).
func TestAuthKindRows(t *testing.T) {
	seen := map[string]bool{}
	for _, kind := range AuthKinds() {
		t.Run(kind.Name, func(t *testing.T) {
			if kind.Name == "" || seen[kind.Name] {
				t.Fatalf("name %q is empty or used twice", kind.Name)
			}
			seen[kind.Name] = true
			for _, key := range kind.Optional {
				if slices.Contains(kind.Needs, key) {
					t.Errorf("%q is both needed and optional", key)
				}
			}
			row := lookupKind(kind.Name)
			sends := row.value != nil
			if got := row.header != nil || row.param != nil; got != sends || (row.header != nil && row.param != nil) {
				t.Fatalf("value set %v, header set %v, param set %v; want a place exactly when there is a value",
					sends, row.header != nil, row.param != nil)
			}
			if sends && row.checkSecrets == nil {
				t.Errorf("sends a credential with no check of its values")
			}
			if kind.OAuth2 && (row.param != nil || row.check == nil) {
				t.Errorf("an OAuth2 kind must send its token in a header and check its settings")
			}

			a := sampleAuth(kind)
			e := &Endpoint{Name: "rows", BaseURL: "https://api.example/v1", Auth: a}
			if err := e.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if err := e.checkSecrets(); err != nil {
				t.Fatalf("checkSecrets: %v", err)
			}
			q, h := url.Values{}, http.Header{}
			row.inject(&a, []byte("access-"+testToken), q, h)
			if !sends {
				if len(q)+len(h) != 0 {
					t.Errorf("inject set %v %v; want nothing", q, h)
				}
				return
			}
			if len(q)+len(h) != 1 {
				t.Fatalf("inject set query %v, header %v; want one place", q, h)
			}
			for name := range q {
				if !row.setsParam(&a, strings.ToUpper(name)) {
					t.Errorf("the credential goes in parameter %q, which setsParam does not report", name)
				}
				_, err := e.Check(Request{Method: "GET", Path: "/", Query: url.Values{name: {"x"}}})
				wantRequestError(t, err, "query", "set by actiongw")
			}
			for name := range h {
				if !row.setsHeader(&a, strings.ToLower(name)) {
					t.Errorf("the credential goes in header %q, which setsHeader does not report", name)
				}
				_, err := e.Check(Request{Method: "GET", Path: "/", Headers: map[string]string{strings.ToLower(name): "x"}})
				wantRequestError(t, err, "headers", "set by actiongw")
			}
		})
	}
	if !seen[AuthNone] {
		t.Errorf("no row for %q", AuthNone)
	}
}

// TestAuthKindSecretsChecked: each kind refuses its values empty, or with
// a control character that would split a header, before anything is sent.
func TestAuthKindSecretsChecked(t *testing.T) {
	for _, kind := range AuthKinds() {
		if lookupKind(kind.Name).value == nil {
			continue
		}
		for _, bad := range []string{"", testToken + "\r\nX-Injected: 1"} {
			a := sampleAuth(kind)
			a.Token, a.Password = []byte(bad), []byte(bad)
			if a.OAuth2 != nil {
				a.OAuth2.ClientSecret, a.OAuth2.RefreshToken = []byte(bad), []byte(bad)
			}
			if kind.Name == AuthBasic && bad == "" {
				a.User = nil // an empty password is a password
			}
			e := &Endpoint{Name: "rows", BaseURL: "https://api.example/v1", Auth: a}
			var ee *EndpointError
			if err := e.checkSecrets(); !errors.As(err, &ee) || ee.Field != "auth" {
				t.Errorf("%s with %q: checkSecrets %v; want an *EndpointError on auth", kind.Name, bad, err)
			}
		}
	}
}
