package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/tlstest"
	"github.com/actiongw/actiongw/secrets"
)

const viaToken = "vt-61c2e0d94a7b-VIATOKEN"

// viaGateway is a gateway whose [http.*] endpoints go through the SSH
// target "bastion" (jump_only) on a real sshd that logs each
// direct-tcpip channel it opens.
type viaGateway struct {
	gw    *Gateway
	cfg   *config.Config
	store secrets.Memory
	sshd  *sshtest.Server
	logs  *syncbuf.Buffer
}

// newViaGateway starts sshd with the extra sshd_config lines and a
// gateway with the endpoints' TOML, each of which may say via = "bastion".
func newViaGateway(t *testing.T, sshdConfig []string, bastion, endpoints string) *viaGateway {
	t.Helper()
	s := sshtest.Start(t, sshtest.Options{LogLevel: "DEBUG1", Config: sshdConfig})
	text := fmt.Sprintf("[server]\nstate_dir = %q\n[ssh.bastion]\nhost = %q\nport = %d\nuser = %q\nkey_secret = \"bastion-key\"\nknown_hosts = %q\njump_only = true\n%s\n%s",
		t.TempDir(), s.Host, s.Port, s.User, s.KnownHosts, bastion, endpoints)
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	store := secrets.Memory{"bastion-key": s.ClientKey, "api-token": []byte(viaToken),
		"api-client-secret": []byte(oauthClientSecret)}
	logs := &syncbuf.Buffer{}
	gw := New(context.Background(), Options{Config: cfg, Secrets: store,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if _, err := gw.Config(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return &viaGateway{gw: gw, cfg: cfg, store: store, sshd: s, logs: logs}
}

// request sends a request to endpoint and returns its result.
func (v *viaGateway) request(t *testing.T, ctx context.Context, in HTTPRequestInput) (*ToolResult, *HTTPRequestOutput) {
	t.Helper()
	r := v.gw.HTTPRequest(ctx, in, nil)
	out, _ := r.Structured.(*HTTPRequestOutput)
	if out == nil {
		t.Fatalf("http_request %s: no structured result: %s", in.Path, r.Text)
	}
	return r, out
}

var directTCPIP = regexp.MustCompile(`server_request_direct_tcpip: originator \S+ port \d+, target (\S+) port (\d+)`)

// opened returns the host:port of every direct-tcpip channel sshd's log
// shows it was asked for.
func (v *viaGateway) opened() []string {
	var got []string
	for _, m := range directTCPIP.FindAllStringSubmatch(v.sshd.Log(), -1) {
		got = append(got, net.JoinHostPort(m[1], m[2]))
	}
	return got
}

func port(srv *httptest.Server) string {
	u, _ := url.Parse(srv.URL)
	return u.Port()
}

// TestHTTPVia: an endpoint on loopback without allow_private, reachable
// only through the bastion's channel (a direct dial is refused by the
// address guard), answers through it; sshd's log shows the channels;
// concurrent requests share the one login, at most max_sessions at once;
// the token it echoes is redacted; the audit intent names the via; check
// proves it.
func TestHTTPVia(t *testing.T) {
	var inFlight, most atomic.Int32
	// Once the concurrent requests begin, each waits until three are in
	// flight at once (the cap), so that the cap is reached, not hoped for.
	var gate atomic.Pointer[chan struct{}]
	var full sync.Once
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if g := gate.Load(); g != nil {
			if n >= 3 {
				full.Do(func() { close(*g) })
			}
			<-*g
		}
		fmt.Fprintf(w, "auth=%s\n", r.Header.Get("Authorization"))
	}))
	defer api.Close()
	v := newViaGateway(t, nil, "max_sessions = 3", fmt.Sprintf(`[http.api]
base_url = %q
via = "bastion"
auth = "bearer"
token_secret = "api-token"
[http.direct]
base_url = %q
`, api.URL, api.URL))
	ctx := context.Background()

	r, out := v.request(t, ctx, HTTPRequestInput{Endpoint: "api", Method: "GET", Path: "/v1/items"})
	if r.IsError || out.Status != StatusOK || out.Body.Head != "auth=Bearer [REDACTED:api-token]\n" {
		t.Fatalf("through the bastion: %s", structured(t, r))
	}
	if r, out := v.request(t, ctx, HTTPRequestInput{Endpoint: "direct", Method: "GET", Path: "/"}); !r.IsError || !strings.Contains(out.Reason, "allow_private") {
		t.Errorf("the same API without via: %s; want it refused by the address guard", r.Text)
	}

	g := make(chan struct{})
	gate.Store(&g)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if r, out := v.request(t, ctx, HTTPRequestInput{Endpoint: "api", Method: "GET", Path: "/v1/items"}); out.Status != StatusOK {
				t.Errorf("concurrent request: %s", r.Text)
			}
		})
	}
	wg.Wait()
	if got := strings.Count(v.sshd.Log(), "Accepted publickey"); got != 1 {
		t.Errorf("sshd accepted %d logins; want 1 (the requests share the pooled connection)", got)
	}
	if got := most.Load(); got > 3 {
		t.Errorf("%d requests were in flight at once; the bastion's max_sessions is 3", got)
	}
	opened := v.opened()
	if len(opened) == 0 || len(opened) > 3 {
		t.Errorf("sshd opened %d direct-tcpip channels (%q); want 1 to 3, kept alive and reused", len(opened), opened)
	}
	for _, a := range opened {
		if a != "127.0.0.1:"+port(api) {
			t.Errorf("sshd was asked for %s; only the endpoint's host and port may be", a)
		}
	}
	if audit := readAudit(t, &fixture{cfg: v.cfg}); !strings.Contains(audit, `"target":"api","via":"bastion"`) {
		t.Errorf("the audit intent does not name the via:\n%s", audit)
	}
	for _, c := range CheckTargets(ctx, v.cfg, v.store, nil, 30*time.Second) {
		if c.Name == "api" && (c.Err != nil || !strings.Contains(c.Detail, `through SSH target "bastion"`)) {
			t.Errorf("check api: %v, %q", c.Err, c.Detail)
		}
	}
	if strings.Contains(v.logs.String(), viaToken) {
		t.Error("the token is in the logs")
	}
}

// TestHTTPViaRefused: a bastion whose sshd forbids the forwarding fails
// the call, and check, with the sshd_config lines that allow it.
func TestHTTPViaRefused(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the API was reached")
	}))
	defer api.Close()
	for _, line := range []string{"PermitOpen none", "AllowTcpForwarding no"} {
		t.Run(line, func(t *testing.T) {
			v := newViaGateway(t, []string{line}, "", fmt.Sprintf("[http.api]\nbase_url = %q\nvia = \"bastion\"\nmax_attempts = 1\n", api.URL))
			r, out := v.request(t, context.Background(), HTTPRequestInput{Endpoint: "api", Method: "GET", Path: "/"})
			want := []string{`target "bastion" refused to open a TCP connection to 127.0.0.1:` + port(api),
				"AllowTcpForwarding local", "PermitOpen 127.0.0.1:" + port(api)}
			for _, w := range want {
				if !r.IsError || out.Status != StatusFailed || !strings.Contains(out.Reason, w) {
					t.Errorf("http_request: %s; want it failed saying %q", r.Text, w)
				}
			}
			checks := CheckTargets(context.Background(), v.cfg, v.store, nil, 30*time.Second)
			for _, c := range checks {
				if c.Name == "api" && (c.Err == nil || !strings.Contains(c.Err.Error(), "AllowTcpForwarding local")) {
					t.Errorf("check api: %v; want the refusal with its fix", c.Err)
				}
			}
		})
	}
}

// TestHTTPViaTLS: https through the channel runs TLS end to end, to a
// name the bastion resolves (localhost), the certificate checked with
// the endpoint's ca_file; without it, the private CA is refused.
func TestHTTPViaTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "private CA")
	srv := ca.Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls=%v sni=%s", r.TLS != nil, r.TLS.ServerName)
	}), tlstest.ServerOptions{})
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	base := "https://localhost:" + port(srv)
	v := newViaGateway(t, nil, "", fmt.Sprintf("[http.api]\nbase_url = %q\nvia = \"bastion\"\nca_file = %q\n[http.noca]\nbase_url = %q\nvia = \"bastion\"\nmax_attempts = 1\n",
		base, caFile, base))
	r, out := v.request(t, context.Background(), HTTPRequestInput{Endpoint: "api", Method: "GET", Path: "/"})
	if r.IsError || out.Body.Head != "tls=true sni=localhost" {
		t.Fatalf("https through the bastion: %s", structured(t, r))
	}
	if r, out := v.request(t, context.Background(), HTTPRequestInput{Endpoint: "noca", Method: "GET", Path: "/"}); !r.IsError || !strings.Contains(out.Reason, "certificate") {
		t.Errorf("without ca_file: %s; want the certificate refused", r.Text)
	}
	for _, a := range v.opened() {
		if a != "localhost:"+port(srv) {
			t.Errorf("sshd was asked for %s; want the name as configured, for it to resolve", a)
		}
	}
}

// TestHTTPViaOAuth2: the token endpoint and the API, both on loopback
// without allow_private, are reached through the bastion.
func TestHTTPViaOAuth2(t *testing.T) {
	s := newOAuthServer(t, 3600)
	v := newViaGateway(t, nil, "", fmt.Sprintf(`[http.api]
base_url = %q
via = "bastion"
auth = "oauth2_client_credentials"
token_url = %q
token_via = "bastion"
client_id = %q
client_secret_secret = "api-client-secret"
`, s.api.URL, s.token.URL+"/oauth/token", oauthClientID))
	for i := range 2 {
		r, out := v.request(t, context.Background(), HTTPRequestInput{Endpoint: "api", Method: "GET", Path: "/v1/items"})
		if r.IsError || out.Body.Head != "auth=Bearer [REDACTED:api.access_token]\n" {
			t.Fatalf("call %d: %s", i, structured(t, r))
		}
	}
	if fetches, calls, _ := s.counts(); fetches != 1 || calls != 2 {
		t.Errorf("%d token requests, %d API requests; want 1, 2", fetches, calls)
	}
	got := strings.Join(v.opened(), " ")
	for _, srv := range []*httptest.Server{s.token, s.api} {
		if !strings.Contains(got, "127.0.0.1:"+port(srv)) {
			t.Errorf("sshd opened %q; want a channel to %s", got, srv.URL)
		}
	}
	all := v.logs.String() + readAudit(t, &fixture{cfg: v.cfg})
	for _, secret := range s.secretsSeen() {
		if strings.Contains(all, secret) {
			t.Errorf("%q leaked into the logs or the audit log", secret)
		}
	}
}

// streamingAPI sends a first chunk, then waits until released or until
// the client goes away; sent is closed after the first chunk, gone when
// the server saw the connection close.
type streamingAPI struct {
	sent, gone, release chan struct{}
	srv                 *httptest.Server
}

func newStreamingAPI(t *testing.T) *streamingAPI {
	a := &streamingAPI{sent: make(chan struct{}), gone: make(chan struct{}), release: make(chan struct{})}
	var once sync.Once
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stream" {
			fmt.Fprint(w, "fine")
			return
		}
		w.Header().Set("Content-Length", "1000000")
		w.Write([]byte(strings.Repeat("x", 1000)))
		w.(http.Flusher).Flush()
		once.Do(func() { close(a.sent) })
		select {
		case <-r.Context().Done():
			close(a.gone)
		case <-a.release:
		}
	}))
	t.Cleanup(func() {
		select {
		case <-a.release:
		default:
			close(a.release)
		}
		a.srv.Close()
	})
	return a
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(60 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestHTTPViaCancel: cancelling a call mid-body closes the connection
// through the bastion: the API sees it go.
func TestHTTPViaCancel(t *testing.T) {
	a := newStreamingAPI(t)
	v := newViaGateway(t, nil, "", fmt.Sprintf("[http.api]\nbase_url = %q\nvia = \"bastion\"\n", a.srv.URL))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *HTTPRequestOutput, 1)
	go func() {
		_, out := v.request(t, ctx, HTTPRequestInput{Endpoint: "api", Method: "GET", Path: "/stream"})
		done <- out
	}()
	wait(t, a.sent, "the first chunk")
	cancel()
	wait(t, a.gone, "the API to see the connection close")
	select {
	case out := <-done:
		if out.Status != StatusCancelled {
			t.Errorf("status %s; want cancelled (%s)", out.Status, out.Reason)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the call did not end")
	}
}

// TestHTTPViaBastionDies: a bastion that dies mid-body fails the call
// with what happened; the next call, once it is back, dials again.
//
// One attempt: the crash may come before the response's headers reach
// the gateway, and a retry would then fail to dial the dead bastion.
func TestHTTPViaBastionDies(t *testing.T) {
	a := newStreamingAPI(t)
	v := newViaGateway(t, nil, "", fmt.Sprintf("[http.api]\nbase_url = %q\nvia = \"bastion\"\nmax_attempts = 1\n", a.srv.URL))
	done := make(chan *HTTPRequestOutput, 1)
	go func() {
		_, out := v.request(t, context.Background(), HTTPRequestInput{Endpoint: "api", Method: "GET", Path: "/stream"})
		done <- out
	}()
	wait(t, a.sent, "the first chunk")
	v.sshd.Crash()
	select {
	case out := <-done:
		t.Log(out.Reason)
		if out.Status != StatusFailed || !strings.Contains(out.Reason, `target "bastion": the SSH connection that carried the connection to 127.0.0.1:`+port(a.srv)+" was lost") {
			t.Errorf("got %s: %s; want failed, saying the bastion's connection was lost", out.Status, out.Reason)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the call did not end")
	}
	v.sshd.Restart()
	if r, out := v.request(t, context.Background(), HTTPRequestInput{Endpoint: "api", Method: "GET", Path: "/"}); out.Status != StatusOK || out.Body.Head != "fine" {
		t.Errorf("after the restart: %s", r.Text)
	}
}

// TestHTTPViaHostile: a prompt-injected agent tries to make the bastion
// open another host or port (its own sshd, say) through the path, the
// query, a header or a redirect it asks the API for: each is refused or
// goes to the endpoint's own host and port, which is all sshd is ever
// asked to open.
func TestHTTPViaHostile(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		fmt.Fprintf(w, "host=%s path=%s", r.Host, r.URL.Path)
	}))
	defer api.Close()
	v := newViaGateway(t, nil, "", fmt.Sprintf("[http.api]\nbase_url = %q\nvia = \"bastion\"\nfollow_redirects = \"same-origin\"\nauth = \"bearer\"\ntoken_secret = \"api-token\"\n", api.URL))
	other := v.sshd.Addr()
	for _, in := range []HTTPRequestInput{
		{Path: "//" + other + "/"},
		{Path: "http://" + other + "/"},
		{Path: "/%2F%2F" + other},
		{Path: "/@" + other},
		{Path: "/x", Headers: map[string]string{"Host": other}},
		{Path: "/x", Headers: map[string]string{"X-Forwarded-Host": other}},
		{Path: "/x", Query: map[string]string{"to": "http://" + other + "/"}},
		{Path: "/x", Query: map[string]string{"to": "//" + other + "/"}},
		{Path: "/x", Query: map[string]string{"to": "http://localhost:" + port(api) + "/"}},
	} {
		in.Endpoint, in.Method = "api", "GET"
		r := v.gw.HTTPRequest(context.Background(), in, nil)
		if out, ok := r.Structured.(*HTTPRequestOutput); ok && out.HTTPStatus == http.StatusOK && !strings.Contains(out.Body.Head, "host=127.0.0.1:"+port(api)) {
			t.Errorf("%+v: %s; want it refused, or sent to the endpoint", in, r.Text)
		}
	}
	for _, a := range v.opened() {
		if a != "127.0.0.1:"+port(api) {
			t.Errorf("sshd was asked to open %s; only the endpoint's host and port may be", a)
		}
	}
	if len(v.opened()) == 0 {
		t.Error("nothing went through the bastion")
	}
}
