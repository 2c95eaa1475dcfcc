package gateway

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/redact"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/secrets"
)

const (
	oauthClientID     = "actiongw-client"
	oauthClientSecret = "cs-7d1e0f9a2b4c-CLIENTSECRET"
	oauthRefreshToken = "rt-0-5a6b7c8d9e-REFRESH"
)

// oauthServer is a token endpoint and the API it grants access to. The
// token endpoint checks the client as clientcredentials sends it (Basic
// auth, or the form), issues access tokens that expire after expiresIn
// seconds, and for the refresh grant rotates the refresh token. The API
// accepts only the latest token, while it has not expired, and echoes it
// in its body and a header (a POST's body instead).
type oauthServer struct {
	t         *testing.T
	expiresIn int
	// failWith, when set, is the token endpoint's whole answer: a 400
	// that quotes the client secret.
	failWith bool
	// claims, when set, makes access tokens JWTs (HS256) with these
	// claims; else they are opaque.
	claims string

	mu        sync.Mutex
	fetches   int // token requests
	calls     int // API requests
	unauthed  int // API requests answered 401
	current   string
	expiry    time.Time
	rejectAll bool     // the API refuses every token
	issued    []string // every access and refresh token handed out
	refresh   string   // the refresh token now valid
	scope     string   // the scope of the last client credentials request

	token, api *httptest.Server
}

func newOAuthServer(t *testing.T, expiresIn int) *oauthServer {
	s := &oauthServer{t: t, expiresIn: expiresIn, refresh: oauthRefreshToken}
	s.token = httptest.NewServer(http.HandlerFunc(s.serveToken))
	s.api = httptest.NewServer(http.HandlerFunc(s.serveAPI))
	t.Cleanup(s.token.Close)
	t.Cleanup(s.api.Close)
	return s
}

func (s *oauthServer) serveToken(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fetches++
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if s.failWith {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":"invalid_request","error_description":"we got %s"}`, oauthClientSecret)
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != oauthClientID || secret != oauthClientSecret {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"invalid_client"}`)
		return
	}
	answer := map[string]any{"token_type": "Bearer", "expires_in": s.expiresIn}
	switch r.PostForm.Get("grant_type") {
	case "client_credentials":
		s.scope = r.PostForm.Get("scope")
	case "refresh_token":
		if r.PostForm.Get("refresh_token") != s.refresh {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
			return
		}
		s.refresh = "rt-" + rand.Text()
		s.issued = append(s.issued, s.refresh)
		answer["refresh_token"] = s.refresh
	default:
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":"unsupported_grant_type"}`)
		return
	}
	s.current = "at-" + rand.Text()
	if s.claims != "" {
		enc := base64.RawURLEncoding
		sig := make([]byte, 32)
		rand.Read(sig)
		s.current = enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(s.claims)) + "." + enc.EncodeToString(sig)
	}
	s.expiry = time.Now().Add(time.Duration(s.expiresIn) * time.Second)
	s.issued = append(s.issued, s.current)
	answer["access_token"] = s.current
	json.NewEncoder(w).Encode(answer)
}

func (s *oauthServer) serveAPI(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	auth := r.Header.Get("Authorization")
	if s.rejectAll || auth != "Bearer "+s.current || time.Now().After(s.expiry) {
		s.unauthed++
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "refused %s\n", auth)
		return
	}
	if r.Method == http.MethodPost {
		io.Copy(w, r.Body)
		return
	}
	w.Header().Set("X-Request-Id", "echo:"+auth)
	fmt.Fprintf(w, "auth=%s\n", auth)
}

// counts returns the token requests, API requests and 401s so far.
func (s *oauthServer) counts() (fetches, calls, unauthed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetches, s.calls, s.unauthed
}

func (s *oauthServer) secretsSeen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string{oauthClientSecret, oauthRefreshToken}, s.issued...)
}

// oauthGateway is a gateway with endpoint "api" on s: auth kind, with
// the extra lines given, and its logs.
type oauthGateway struct {
	gw    *Gateway
	cfg   *config.Config
	store secrets.Memory
	logs  *syncbuf.Buffer
}

func newOAuthGateway(t *testing.T, s *oauthServer, endpoint string) *oauthGateway {
	t.Helper()
	toml := fmt.Sprintf("[server]\nstate_dir = %q\n[http.api]\nmethods = [\"GET\", \"POST\"]\n%s\n", t.TempDir(), endpoint)
	cfg, err := config.Parse([]byte(toml))
	if err != nil {
		t.Fatal(err)
	}
	store := secrets.Memory{"api-client-secret": []byte(oauthClientSecret), "api-refresh-token": []byte(oauthRefreshToken)}
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	gw := New(context.Background(), Options{Config: cfg, Secrets: store, Logger: log})
	if _, err := gw.Config(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return &oauthGateway{gw: gw, cfg: cfg, store: store, logs: logs}
}

func clientCredentials(s *oauthServer) string {
	return fmt.Sprintf(`base_url = %q
allow_private = true
auth = "oauth2_client_credentials"
token_url = %q
client_id = %q
client_secret_secret = "api-client-secret"
scopes = ["read", "write:items"]`, s.api.URL, s.token.URL+"/oauth/token", oauthClientID)
}

// get calls GET /v1/items on "api" and returns the result.
func (g *oauthGateway) get(t *testing.T) (*ToolResult, *HTTPRequestOutput) {
	t.Helper()
	r := g.gw.HTTPRequest(context.Background(), HTTPRequestInput{Endpoint: "api", Method: "GET", Path: "/v1/items"}, nil)
	out, _ := r.Structured.(*HTTPRequestOutput)
	if out == nil {
		t.Fatalf("http_request: no structured result: %s", r.Text)
	}
	return r, out
}

// checkNoOAuthSecret fails if a token, a refresh token or the client
// secret shows in the results, the logs or the audit log.
func checkNoOAuthSecret(t *testing.T, s *oauthServer, g *oauthGateway, results ...*ToolResult) {
	t.Helper()
	all := g.logs.String() + readAudit(t, &fixture{cfg: g.cfg})
	for _, r := range results {
		all += structured(t, r) + r.Text
	}
	for _, secret := range s.secretsSeen() {
		if strings.Contains(all, secret) {
			t.Errorf("%q leaked into a result, the logs or the audit log", secret)
		}
	}
}

func TestOAuth2ClientCredentials(t *testing.T) {
	s := newOAuthServer(t, 3600)
	g := newOAuthGateway(t, s, clientCredentials(s))
	const redacted = "Bearer [REDACTED:api.access_token]"
	var results []*ToolResult
	step := func(name string, wantStatus, wantFetches, wantCalls int, wantBody string) {
		t.Helper()
		r, out := g.get(t)
		results = append(results, r)
		if out.HTTPStatus != wantStatus {
			t.Errorf("%s: HTTP %d; want %d (%s)", name, out.HTTPStatus, wantStatus, r.Text)
		}
		if fetches, calls, _ := s.counts(); fetches != wantFetches || calls != wantCalls {
			t.Errorf("%s: %d token requests, %d API requests; want %d, %d", name, fetches, calls, wantFetches, wantCalls)
		}
		if out.Body.Head != wantBody {
			t.Errorf("%s: body %q; want %q", name, out.Body.Head, wantBody)
		}
		if wantStatus == 200 && out.Headers["x-request-id"] != "echo:"+redacted {
			t.Errorf("%s: echoed header %q; want it redacted", name, out.Headers["x-request-id"])
		}
	}
	step("first call fetches a token", 200, 1, 1, "auth="+redacted+"\n")
	step("second call reuses it", 200, 1, 2, "auth="+redacted+"\n")
	if s.scope != "read write:items" {
		t.Errorf("scope %q; want %q", s.scope, "read write:items")
	}

	// The API revokes the token: one 401, one new token, one retry.
	s.mu.Lock()
	s.current = "revoked"
	s.mu.Unlock()
	step("a 401 fetches again and retries", 200, 2, 4, "auth="+redacted+"\n")
	if _, out := g.get(t); out.Attempts != 1 {
		t.Errorf("after the retry: %d attempts; want 1 (the new token reused)", out.Attempts)
	}

	// The API refuses every token: exactly one new token and one retry,
	// then the 401 is the answer.
	s.mu.Lock()
	s.rejectAll = true
	s.mu.Unlock()
	step("a second 401 is the answer", 401, 3, 7, "refused "+redacted+"\n")
	checkNoOAuthSecret(t, s, g, results...)
}

func TestOAuth2TokenExpiry(t *testing.T) {
	s := newOAuthServer(t, 1)
	g := newOAuthGateway(t, s, clientCredentials(s))
	_, out := g.get(t)
	// The client reckoned the expiry from its own clock before the call
	// returned: one second after that, the token is past it, whatever
	// the load. Expiry is wall time, so this waits on the clock.
	<-time.After(time.Second)
	if out.HTTPStatus != 200 {
		t.Fatalf("first call: HTTP %d", out.HTTPStatus)
	}
	r, out := g.get(t)
	fetches, calls, unauthed := s.counts()
	if out.HTTPStatus != 200 || fetches != 2 || calls != 2 || unauthed != 0 {
		t.Errorf("after expiry: HTTP %d, %d token requests, %d API requests, %d refused; want 200, 2, 2, 0 (%s)",
			out.HTTPStatus, fetches, calls, unauthed, r.Text)
	}
	checkNoOAuthSecret(t, s, g, r)
}

func TestOAuth2TokenEndpointGuarded(t *testing.T) {
	s := newOAuthServer(t, 3600)
	// https, so the config takes it; on loopback, which the endpoint may
	// not reach: the guard must refuse the token endpoint before a byte
	// of the client secret is sent.
	tokenURL := strings.Replace(s.token.URL, "http://", "https://", 1) + "/token"
	g := newOAuthGateway(t, s, fmt.Sprintf(`base_url = "https://api.example.com"
auth = "oauth2_client_credentials"
token_url = %q
client_id = %q
client_secret_secret = "api-client-secret"`, tokenURL, oauthClientID))
	r, out := g.get(t)
	if out.Status != StatusFailed || !strings.Contains(out.Reason, "denied range (loopback)") {
		t.Errorf("status %s, reason %q; want failed, the loopback address refused", out.Status, out.Reason)
	}
	if fetches, calls, _ := s.counts(); fetches != 0 || calls != 0 {
		t.Errorf("%d token requests, %d API requests; want none", fetches, calls)
	}
	checkNoOAuthSecret(t, s, g, r)
}

func TestOAuth2TokenEndpointEchoesSecret(t *testing.T) {
	s := newOAuthServer(t, 3600)
	s.failWith = true
	g := newOAuthGateway(t, s, clientCredentials(s))
	r, out := g.get(t)
	if out.Status != StatusFailed || !strings.Contains(out.Reason, "HTTP 400 invalid_request") {
		t.Errorf("status %s, reason %q; want failed with the token endpoint's status and code", out.Status, out.Reason)
	}
	if _, calls, _ := s.counts(); calls != 0 {
		t.Errorf("%d API requests; want none without a token", calls)
	}
	checkNoOAuthSecret(t, s, g, r)
}

func TestOAuth2RefreshToken(t *testing.T) {
	s := newOAuthServer(t, 3600)
	g := newOAuthGateway(t, s, fmt.Sprintf(`base_url = %q
allow_private = true
auth = "oauth2_refresh_token"
token_url = %q
client_id = %q
client_secret_secret = "api-client-secret"
refresh_token_secret = "api-refresh-token"`, s.api.URL, s.token.URL, oauthClientID))
	var results []*ToolResult
	for i, revoke := range []bool{false, false, true} {
		if revoke {
			s.mu.Lock()
			s.current = "revoked"
			s.mu.Unlock()
		}
		r, out := g.get(t)
		results = append(results, r)
		if out.HTTPStatus != 200 {
			t.Fatalf("call %d: HTTP %d (%s)", i, out.HTTPStatus, r.Text)
		}
		// The rotated refresh token is in the keyring before it is used.
		s.mu.Lock()
		want := s.refresh
		s.mu.Unlock()
		if got := string(g.store["api-refresh-token"]); got != want {
			t.Errorf("call %d: keyring holds %q; want the rotated %q", i, got, want)
		}
	}
	if fetches, calls, _ := s.counts(); fetches != 2 || calls != 4 {
		t.Errorf("%d token requests, %d API requests; want 2, 4", fetches, calls)
	}
	// A reload reads the rotated refresh token from the keyring: the
	// token cached for the old configuration is not reused, and the new
	// refresh token works.
	if err := g.gw.Reload(context.Background(), g.cfg, nil); err != nil {
		t.Fatal(err)
	}
	r, out := g.get(t)
	results = append(results, r)
	if out.HTTPStatus != 200 {
		t.Errorf("after reload: HTTP %d (%s)", out.HTTPStatus, r.Text)
	}
	checkNoOAuthSecret(t, s, g, results...)
}

// TestLearnedTokensKeptUntilExpiry: however many tokens an agent makes the
// gateway fetch, none is forgotten while it may still work; expired ones
// are.
func TestLearnedTokensKeptUntilExpiry(t *testing.T) {
	g := &Gateway{}
	if err := g.publishRedactor([]redact.Secret{{Name: "k", Value: []byte("keyring-secret")}}); err != nil {
		t.Fatal(err)
	}
	expired := "at-expired-" + rand.Text()
	if err := g.learn("api.access_token", []byte(expired), time.Now().Add(-2*learnedGrace)); err != nil {
		t.Fatal(err)
	}
	var live []string
	for range 50 {
		live = append(live, "at-live-"+rand.Text())
		if err := g.learn("api.access_token", []byte(live[len(live)-1]), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tok := range append(live, "keyring-secret") {
		if got := g.redactString("x " + tok + " y"); strings.Contains(got, tok) {
			t.Errorf("redactString kept %q: %q", tok, got)
		}
	}
	if got := g.redactString(expired); got != expired {
		t.Errorf("an expired token is still redacted (%q); want it dropped", got)
	}
	// A reload's redactor keeps what was learned.
	if err := g.publishRedactor(nil); err != nil {
		t.Fatal(err)
	}
	if got := g.redactString(live[0]); got != "[REDACTED:api.access_token]" {
		t.Errorf("after a reload: %q; want the learned token redacted", got)
	}
}

// TestJWTClaimsAreNoOracle: an access token that is a JWT begins with a
// header and claims an agent can know or guess (algorithm, issuer,
// audience, client, times): often more than half of the token. An echo of
// them and one guessed character must come back as it was sent, right
// guess or wrong; only the whole token is replaced.
func TestJWTClaimsAreNoOracle(t *testing.T) {
	s := newOAuthServer(t, 3600)
	s.claims = `{"iss":"https://idp.example/","sub":"actiongw-client@clients","aud":"https://api.example/","iat":1764550000,"exp":1764553600,"scope":"read write:items","gty":"client-credentials"}`
	g := newOAuthGateway(t, s, clientCredentials(s))
	if _, out := g.get(t); out.Status != StatusOK {
		t.Fatalf("status %s; want %s", out.Status, StatusOK)
	}
	s.mu.Lock()
	token := s.current
	s.mu.Unlock()
	known := token[:strings.LastIndexByte(token, '.')+1]
	if 2*len(known) < len(token) {
		t.Fatalf("header and claims are %d of the token's %d bytes; want half or more", len(known), len(token))
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for _, c := range alphabet {
		body := "token: " + known + string(c)
		r := g.gw.HTTPRequest(context.Background(), HTTPRequestInput{Endpoint: "api", Method: "POST", Path: "/echo", Body: body}, nil)
		out, _ := r.Structured.(*HTTPRequestOutput)
		if out == nil {
			t.Fatalf("http_request: no structured result: %s", r.Text)
		}
		if got := out.Body.Head + out.Body.Tail; got != body {
			t.Errorf("the echo of the token's header, claims and %q came back as %q: the redactor told the signature's first character", c, got)
		}
	}
	if got := g.gw.red.Load().RedactString("x " + token[:len(token)-1]); got != "x "+token[:len(token)-1] {
		t.Errorf("the token less its last character came back as %q; want it as it was", got)
	}
	if got := g.gw.red.Load().RedactString("x " + token); got != "x [REDACTED:api.access_token]" {
		t.Errorf("the token came back as %q; want it redacted", got)
	}
}
