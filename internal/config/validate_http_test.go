package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/actiongw/actiongw/httpact"
)

// authValues is a valid value, as TOML, of every auth key: TestAuthKinds
// fills a row's keys from it, so a row with a key it lacks fails until
// one is added here.
var authValues = map[string]string{
	"token_secret": `"api-token"`, "user": `"deploy"`, "password_secret": `"api-password"`,
	"header": `"X-Api-Key"`, "param": `"api_key"`,
	"token_url": `"https://auth.example/token"`, "client_id": `"actiongw"`,
	"client_secret_secret": `"api-client-secret"`, "scopes": `["read"]`,
	"refresh_token_secret": `"api-refresh-token"`,
}

// TestAuthKeys: every key a row of httpact's table names is an auth key
// of the endpoint, which validation then reads, and a TOML key.
func TestAuthKeys(t *testing.T) {
	settings := (&HTTPEndpoint{}).AuthSettings()
	keys := tomlKeys(HTTPEndpoint{})
	for k := range settings {
		if !slices.Contains(keys, k) {
			t.Errorf("AuthSettings names %q, which is no key of [http.*]", k)
		}
	}
	for _, kind := range httpact.AuthKinds() {
		for _, k := range append(kind.Needs, kind.Optional...) {
			if _, ok := settings[k]; !ok {
				t.Errorf("auth %q names %q, which AuthSettings does not hold", kind.Name, k)
			}
		}
	}
}

// TestAuthKinds loads, for every row of httpact's table, an endpoint with
// the keys the row needs and may use, then one without each needed key
// and one with each other auth key: refused, naming the key.
func TestAuthKinds(t *testing.T) {
	all := slices.Sorted(maps.Keys((&HTTPEndpoint{}).AuthSettings()))
	for _, kind := range httpact.AuthKinds() {
		t.Run(kind.Name, func(t *testing.T) {
			endpoint := func(keys []string) string {
				var b strings.Builder
				fmt.Fprintf(&b, "[http.api]\nbase_url = \"https://api.example\"\nauth = %q\n", kind.Name)
				for _, k := range keys {
					v, ok := authValues[k]
					if !ok {
						t.Fatalf("no test value for %q: add one to authValues", k)
					}
					fmt.Fprintf(&b, "%s = %s\n", k, v)
				}
				return b.String()
			}
			uses := append(slices.Clone(kind.Needs), kind.Optional...)
			if _, err := Parse([]byte(endpoint(uses))); err != nil {
				t.Fatalf("with %q: %v", uses, err)
			}
			for _, k := range kind.Needs {
				_, err := Parse([]byte(endpoint(slices.DeleteFunc(slices.Clone(uses), func(s string) bool { return s == k }))))
				wantField(t, err, "http.api."+k, fmt.Sprintf("is required by auth = %q", kind.Name))
			}
			for _, k := range all {
				if slices.Contains(uses, k) {
					continue
				}
				_, err := Parse([]byte(endpoint(append(slices.Clone(kind.Needs), k))))
				wantField(t, err, "http.api."+k, fmt.Sprintf("is not used by auth = %q", kind.Name))
			}
		})
	}
	_, err := Parse([]byte("[http.api]\nbase_url = \"https://api.example\"\nauth = \"oauth\"\n"))
	wantField(t, err, "http.api.auth", `must be none, bearer, basic, header, query, oauth2_client_credentials or oauth2_refresh_token, got "oauth"`)
}

// wantField fails unless err holds a *FieldError on field whose reason
// is reason.
func wantField(t *testing.T, err error, field, reason string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v; want an *Error", err)
	}
	for _, p := range e.Problems {
		if p.Field == field && p.Reason == reason {
			return
		}
	}
	t.Errorf("error %v; want %s: %s", err, field, reason)
}

// TestVia: via and token_via name an [ssh.*] target, not with a proxy,
// token_via only with a token URL, and the URLs they carry name a host
// the target may be asked for.
func TestVia(t *testing.T) {
	const ssh = "[ssh.bastion]\nhost = \"bastion.example\"\nuser = \"u\"\nagent = true\njump_only = true\n" +
		"[ssh.certified]\nhost = \"c.example\"\nuser = \"u\"\nca_secret = \"ca\"\n"
	oauth := "auth = \"oauth2_client_credentials\"\nclient_id = \"id\"\nclient_secret_secret = \"cs\"\n"
	for _, tc := range []struct {
		name, endpoint, problem string // "" for none
	}{
		{"private, no allow_private", "base_url = \"http://10.0.0.5:9090\"\nvia = \"bastion\"", ""},
		{"a name", "base_url = \"https://prometheus.internal\"\nvia = \"bastion\"", ""},
		{"token through it", "base_url = \"https://es.internal\"\nvia = \"bastion\"\n" + oauth + "token_url = \"http://127.0.0.1:8080/token\"\ntoken_via = \"bastion\"", ""},
		{"token direct", "base_url = \"https://es.internal\"\nvia = \"bastion\"\n" + oauth + "token_url = \"https://idp.example/token\"", ""},
		{"a CA target", "base_url = \"https://es.internal\"\nvia = \"certified\"", "http.api.via: names [ssh.certified], a ca_secret target"},
		{"no such target", "base_url = \"https://es.internal\"\nvia = \"nosuch\"", "http.api.via: names no [ssh.nosuch] target"},
		{"with a proxy", "base_url = \"https://es.internal\"\nvia = \"bastion\"\nproxy = \"http://127.0.0.1:3128\"", "http.api.via: goes through an SSH target: not together with proxy"},
		{"link-local", "base_url = \"http://169.254.169.254\"\nvia = \"bastion\"", "http.api.base_url: 169.254.169.254 resolves to 169.254.169.254, which is in a denied range (link-local)"},
		{"token_via without a token URL", "base_url = \"https://es.internal\"\ntoken_via = \"bastion\"", "http.api.token_via: is only for an OAuth2 token_url"},
		{"plain token far away", "base_url = \"https://es.internal\"\nvia = \"bastion\"\n" + oauth + "token_url = \"http://10.0.0.5/token\"\ntoken_via = \"bastion\"", "http.api.token_url: must start with https://"},
		{"token on the base's host, another way", "base_url = \"https://es.internal\"\nvia = \"bastion\"\n" + oauth + "token_url = \"https://es.internal/token\"", "http.api.token_via: the token_url has the base_url's host and port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(ssh + "[http.api]\n" + tc.endpoint + "\n"))
			switch {
			case tc.problem == "" && err != nil:
				t.Fatalf("Parse: %v", err)
			case tc.problem != "" && (err == nil || !strings.Contains(err.Error(), tc.problem)):
				t.Fatalf("Parse: %v; want %q", err, tc.problem)
			}
		})
	}
}
