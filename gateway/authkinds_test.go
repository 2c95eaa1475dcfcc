package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/actiongw/actiongw/httpact"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/redact"
	"github.com/actiongw/actiongw/secrets"
)

// echoAll is a loopback API that answers every request with all of it:
// the method, the path and query, every header and the body. POST /token
// is an OAuth2 token endpoint that issues access tokens of one length,
// each made of the current run's letter. It keeps what it received, and
// the tokens it issued.
type echoAll struct {
	*httptest.Server
	mu       sync.Mutex
	run      byte // the letter of the current run's tokens
	issued   int
	received []string
	tokens   []string
}

func newEchoAll(t *testing.T) *echoAll {
	s := &echoAll{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s\nHost: %s\n", r.Method, r.RequestURI, r.Host)
		for _, k := range slices.Sorted(maps.Keys(r.Header)) {
			fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(r.Header[k], ", "))
		}
		fmt.Fprintf(&b, "\n%s\n", body)
		// The token request too: what the kind sends there is sent.
		s.received = append(s.received, b.String())
		if r.URL.Path == "/token" {
			s.issued++
			tok := fmt.Sprintf("at-%c%03d-%s", s.run, s.issued, strings.Repeat(string(s.run), 24))
			s.tokens = append(s.tokens, tok)
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
			return
		}
		io.WriteString(w, b.String())
	}))
	t.Cleanup(s.Close)
	return s
}

// authTestValues are the config values, as TOML, of the auth keys that
// name no secret; "URL" is the echo server's. A row with a key neither
// here nor ending in _secret fails TestAuthKindsEcho until it is added.
var authTestValues = map[string]string{
	"user": `"deploy"`, "header": `"X-Api-Key"`, "param": `"api_key"`,
	"token_url": `"URL/token"`, "client_id": `"actiongw-test"`, "scopes": `["read"]`,
}

// authRunSecret is the value of the secret of key in a run. The runs'
// values have one length and differ in every byte, and in the top and
// the bottom bits of the first and the last: where a form that holds
// the secret and more is encoded (base64 of "user:" and a password),
// the characters at its edges mix bits of both, and they differ between
// the runs unless the whole form is redacted.
func authRunSecret(run byte, key string) string {
	if run == 'a' {
		return "0Kq7vX2mP9wR4tY6n-" + key + "-0"
	}
	return "zH3jL5cF1gS8kD2xM_" + strings.ToUpper(key) + "_z"
}

// TestAuthKindsEcho sends, for every row of httpact's table of auth
// kinds, a request with the kind's credential to a server that echoes
// everything it receives, twice, with secrets that differ in every byte.
// What the server received differs between the runs (the credential is
// in it); what the agent gets back must not: every form of the secrets,
// of their derived forms (the row's Derived) and of the access tokens is
// redacted whole. A new kind that sends a form of its secret the
// redactor does not know, such as Basic auth's "user:password" without
// its derived form, fails here.
func TestAuthKindsEcho(t *testing.T) {
	srv := newEchoAll(t)
	for _, kind := range httpact.AuthKinds() {
		t.Run(kind.Name, func(t *testing.T) {
			var views, raws, kepts []string
			for _, run := range []byte{'a', 'b'} {
				view, raw, kept := echoAuthRun(t, srv, kind, run)
				views, raws, kepts = append(views, view), append(raws, raw), append(kepts, kept)
			}
			if views[0] != views[1] {
				t.Errorf("the agent's view depends on the secrets:\nrun a: %s\nrun b: %s", views[0], views[1])
			}
			if kepts[0] != kepts[1] {
				t.Errorf("the requests, redacted, depend on the secrets:\nrun a: %s\nrun b: %s", kepts[0], kepts[1])
			}
			sends := kind.Name != httpact.AuthNone
			if got := raws[0] != raws[1]; got != sends {
				t.Errorf("the requests differ between the runs: %v; want %v (raw a:\n%s\nraw b:\n%s)", got, sends, raws[0], raws[1])
			}
			if sends && !strings.Contains(views[0], "[REDACTED:") {
				t.Errorf("the agent's view holds no redaction: %s", views[0])
			}
		})
	}
}

// echoAuthRun sends one request with kind's credential and the secrets of
// run, checks that every form the redactor is told of that the request
// carries comes back replaced, and returns what the agent saw of the
// answer and what the server received.
func echoAuthRun(t *testing.T, srv *echoAll, kind httpact.AuthKind, run byte) (view, raw, kept string) {
	t.Helper()
	srv.mu.Lock()
	srv.run, srv.received, srv.tokens = run, nil, nil
	srv.mu.Unlock()
	var b strings.Builder
	store := secrets.Memory{}
	fmt.Fprintf(&b, "[server]\nstate_dir = %q\n[http.api]\nbase_url = %q\nallow_private = true\nmethods = [\"POST\"]\nauth = %q\n",
		t.TempDir(), srv.URL, kind.Name)
	for _, key := range append(slices.Clone(kind.Needs), kind.Optional...) {
		if strings.HasSuffix(key, "_secret") {
			fmt.Fprintf(&b, "%s = \"api-%s\"\n", key, strings.ReplaceAll(key, "_", "-"))
			store["api-"+strings.ReplaceAll(key, "_", "-")] = []byte(authRunSecret(run, key))
			continue
		}
		v, ok := authTestValues[key]
		if !ok {
			t.Fatalf("no test value for %q: add one to authTestValues", key)
		}
		fmt.Fprintf(&b, "%s = %s\n", key, strings.ReplaceAll(v, "URL", srv.URL))
	}
	cfg, err := config.Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	gw := New(context.Background(), Options{Config: cfg, Secrets: store})
	defer gw.Close()
	if _, err := gw.Config(); err != nil {
		t.Fatal(err)
	}
	r := gw.HTTPRequest(context.Background(), HTTPRequestInput{Endpoint: "api", Method: "POST", Path: "/echo",
		Query: map[string]string{"q": "x"}, Body: `{"hello":"world"}`}, nil)
	out, ok := r.Structured.(*HTTPRequestOutput)
	if !ok || out.HTTPStatus != 200 {
		t.Fatalf("http_request: %s", r.Text)
	}
	view = fmt.Sprintf("headers %v\nbody %q %q", out.Headers, out.Body.Head, out.Body.Tail)

	srv.mu.Lock()
	raw = strings.Join(srv.received, "\n")
	tokens := slices.Clone(srv.tokens)
	srv.mu.Unlock()
	// Every secret, every derived form the gateway told the redactor of
	// and every access token: sent, and back only redacted.
	var values = map[string]secrets.Value{}
	for name, v := range store {
		values[name] = secrets.NewValue(v)
	}
	known := derivedSecrets(cfg.HTTP["api"], values)
	for _, d := range known {
		if !hasForm(raw, d.Value) {
			t.Errorf("the derived form of %s is not in the request: the row derives what the kind does not send", d.Name)
		}
	}
	for name, v := range store {
		known = append(known, redact.Secret{Name: name, Value: v})
	}
	for _, tok := range tokens {
		known = append(known, redact.Secret{Name: "api" + accessTokenSuffix, Value: []byte(tok)})
	}
	agent := view + structured(t, r) + r.Text
	for _, s := range known {
		for _, f := range redact.Forms(s.Value) {
			if strings.Contains(agent, f) {
				t.Errorf("a form of %s, %q, came back to the agent", s.Name, f)
			}
		}
	}
	// What the requests carried, the token request's too, as the agent
	// would read it where a host kept it (a proxy's log): redacted by what
	// the gateway knows, it must not depend on the secrets either.
	red, err := redact.New(known)
	if err != nil {
		t.Fatal(err)
	}
	return view, raw, red.RedactString(raw)
}

// hasForm reports whether s holds some form of v.
func hasForm(s string, v []byte) bool {
	return slices.ContainsFunc(redact.Forms(v), func(f string) bool { return strings.Contains(s, f) })
}
