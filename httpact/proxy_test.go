package httpact

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/proxytest"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/internal/testkit/tlstest"
)

const testClientSecret = "client-secret-7be1-SECRET"

// proxiedServer is an HTTPS server as opts says, with a certificate from
// a new CA, and a pool that holds that CA. It answers /token as an OAuth2
// token endpoint (client credentials testClientSecret, access token
// testToken) and every other path with the credential and host it got.
func proxiedServer(t *testing.T, opts tlstest.ServerOptions) (*httptest.Server, *x509.CertPool) {
	t.Helper()
	ca := tlstest.NewCA(t, "proxy test CA")
	srv := ca.Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			if _, secret, _ := r.BasicAuth(); secret != testClientSecret {
				http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, testToken)
			return
		}
		fmt.Fprintf(w, "auth=%s host=%s path=%s", r.Header.Get("Authorization"), r.Host, r.URL.Path)
	}), opts)
	return srv, ca.Pool()
}

// oauth2 is client credentials auth against srv's /token.
func oauth2Auth(srv *httptest.Server, seen *[]byte) Auth {
	return Auth{Kind: AuthOAuth2ClientCredentials, OAuth2: &OAuth2{TokenURL: srv.URL + "/token", ClientID: "actiongw",
		ClientSecret: []byte(testClientSecret),
		OnToken:      func(tok []byte, _ time.Time) error { *seen = tok; return nil }}}
}

// connsSince returns what each connection p accepted after the first
// mark sent it.
func connsSince(p *proxytest.Proxy, mark int) []string { return p.Conns()[mark:] }

// wantOnlyConnect fails unless conns, the connections of a request through
// p, each began with CONNECT hostport, every request line p read is one,
// and nothing p ever got holds a credential or the path in the clear.
func wantOnlyConnect(t *testing.T, p *proxytest.Proxy, conns []string, hostport string) {
	t.Helper()
	if len(conns) == 0 {
		t.Errorf("the request did not go through the proxy")
	}
	for _, sent := range conns {
		if !strings.HasPrefix(sent, "CONNECT "+hostport+" HTTP/1.1\r\n") {
			t.Errorf("the proxy got %.80q; want a CONNECT %s first", sent, hostport)
		}
	}
	for _, l := range p.Requests() {
		if !strings.HasPrefix(l, "CONNECT "+hostport+" ") {
			t.Errorf("the proxy read %q; want only CONNECT %s", l, hostport)
		}
	}
	sent := p.Sent()
	for _, secret := range []string{testToken, testClientSecret, "Authorization", "Proxy-Authorization", "/api", "/token"} {
		if strings.Contains(sent, secret) {
			t.Errorf("the proxy got %q in the clear", secret)
		}
	}
}

// TestTinyproxy sends requests through Debian's tinyproxy: an https
// endpoint's requests and token fetches cross it as CONNECT host:port
// only, its log and the bytes it got hold no credential; check goes
// through it too; a plain http endpoint without a credential is
// forwarded; a target the proxy cannot reach is a clear failure.
func TestTinyproxy(t *testing.T) {
	p := proxytest.StartTinyproxy(t)
	srv, roots := proxiedServer(t, tlstest.ServerOptions{})
	hostport := srv.Listener.Addr().String()
	c, logs := newTestClient(t)
	ctx := context.Background()
	endpoint := func(name string, auth Auth) *Endpoint {
		return &Endpoint{Name: name, BaseURL: srv.URL + "/api", Auth: auth, AllowPrivate: true, RootCAs: roots,
			Proxy: "http://" + p.Addr}
	}

	var fetched []byte
	for _, tt := range []struct {
		name string
		auth Auth
	}{{"bearer", bearer()}, {"oauth2", oauth2Auth(srv, &fetched)}} {
		t.Run(tt.name, func(t *testing.T) {
			mark := len(p.Conns())
			var body bytes.Buffer
			res, err := c.Do(ctx, endpoint(tt.name, tt.auth), Request{Method: "GET", Path: "/x"}, &body)
			if err != nil || res.Status != StatusOK {
				t.Fatalf("Do = %+v, %v; want ok", res, err)
			}
			if got, want := body.String(), "auth=Bearer "+testToken+" host="+hostport+" path=/api/x"; got != want {
				t.Errorf("the server got %q; want %q", got, want)
			}
			p.WaitRequest(t, "CONNECT "+hostport)
			wantOnlyConnect(t, p, connsSince(p, mark), hostport)
			checkNoSecret(t, logs, res)
		})
	}
	if string(fetched) != testToken {
		t.Errorf("the token fetched through the proxy is %q; want %q", fetched, testToken)
	}

	t.Run("check", func(t *testing.T) {
		mark := len(p.Conns())
		if err := c.Probe(ctx, endpoint("probe", bearer())); err != nil {
			t.Fatalf("Probe = %v; want nil", err)
		}
		wantOnlyConnect(t, p, connsSince(p, mark), hostport)
	})

	t.Run("plain http without a credential", func(t *testing.T) {
		plain := newEchoServer(t)
		e := testEndpoint(plain.Server, Auth{})
		e.Proxy = "http://" + p.Addr
		var body bytes.Buffer
		res, err := c.Do(ctx, e, Request{Method: "GET", Path: "/x"}, &body)
		if err != nil || res.Status != StatusOK {
			t.Fatalf("Do = %+v, %v; want ok", res, err)
		}
		p.WaitRequest(t, "GET "+plain.URL+"/api/x ")
	})

	t.Run("target unreachable", func(t *testing.T) {
		closed := httptest.NewTLSServer(http.NotFoundHandler())
		closed.Close()
		e := endpoint("closed", bearer())
		e.BaseURL = closed.URL
		res, err := c.Do(ctx, e, Request{Method: "GET", Path: "/x"}, io.Discard)
		if err != nil || res.Status != StatusFailed {
			t.Fatalf("Do = %+v, %v; want failed", res, err)
		}
		want := fmt.Sprintf("the proxy %s refused CONNECT %s: ", p.Addr, closed.Listener.Addr())
		if !strings.Contains(res.Reason, want) {
			t.Errorf("reason %q; want it to contain %q", res.Reason, want)
		}
	})
}

// TestTinyproxyFromEnvironment runs use_env_proxy with Debian's tinyproxy
// in HTTPS_PROXY: a host NO_PROXY lists is reached directly, any other
// through the proxy. The target is this machine's own name, which
// tinyproxy resolves as this process does; a loopback address would never
// be proxied.
func TestTinyproxyFromEnvironment(t *testing.T) {
	p := proxytest.StartTinyproxy(t)
	name, addr := loopbackName(t)
	srv, roots := proxiedServer(t, tlstest.ServerOptions{Names: []string{name}, Addr: netip.AddrPortFrom(addr, 0).String()})
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	target := net.JoinHostPort(name, port)
	t.Setenv("HTTPS_PROXY", "http://"+p.Addr)
	e := &Endpoint{Name: "env", BaseURL: "https://" + target + "/api", Auth: bearer(), AllowPrivate: true, RootCAs: roots,
		ProxyFromEnvironment: true}
	c, logs := newTestClient(t)
	ctx := context.Background()

	for _, noProxy := range []string{"", "other.example", name} {
		t.Run("NO_PROXY="+noProxy, func(t *testing.T) {
			t.Setenv("NO_PROXY", noProxy)
			mark := len(p.Conns())
			var body bytes.Buffer
			res, err := c.Do(ctx, e, Request{Method: "GET", Path: "/x"}, &body)
			if err != nil || res.Status != StatusOK {
				t.Fatalf("Do = %+v, %v; want ok", res, err)
			}
			if !strings.HasPrefix(body.String(), "auth=Bearer "+testToken) {
				t.Errorf("the server got %q; want the credential", body.String())
			}
			conns := connsSince(p, mark)
			if noProxy == name {
				if len(conns) != 0 {
					t.Errorf("the proxy got %.80q; want nothing for a host NO_PROXY lists", conns)
				}
				return
			}
			p.WaitRequest(t, "CONNECT "+target)
			wantOnlyConnect(t, p, conns, target)
			checkNoSecret(t, logs, res)
		})
	}
}

// loopbackName returns this machine's host name and the address it
// resolves to, which must be loopback (as /etc/hosts has it on Debian).
func loopbackName(t *testing.T) (string, netip.Addr) {
	t.Helper()
	name, err := os.Hostname()
	if err == nil && !strings.EqualFold(name, "localhost") {
		addrs, err := resolve(context.Background(), name)
		if err == nil && len(addrs) > 0 && addrs[0].Unmap().IsLoopback() {
			return name, addrs[0].Unmap()
		}
	}
	testenv.Missing(t, "a host name that resolves to a loopback address", "list the machine's name in /etc/hosts")
	return "", netip.Addr{}
}

// TestProxyHostile: what an agent sends cannot reach another host through
// the proxy nor show it the credential. Its headers cannot set Host or
// Proxy-*, its path cannot name a host, and every request line the proxy
// reads names the configured origin (CONNECT for https, the absolute URL
// for plain http without a credential).
func TestProxyHostile(t *testing.T) {
	p := proxytest.StartTinyproxy(t)
	srv, roots := proxiedServer(t, tlstest.ServerOptions{})
	plain := newEchoServer(t)
	c, logs := newTestClient(t)
	ctx := context.Background()
	secure := &Endpoint{Name: "secure", BaseURL: srv.URL + "/api", Auth: bearer(), AllowPrivate: true, RootCAs: roots,
		Proxy: "http://" + p.Addr}
	open := testEndpoint(plain.Server, Auth{})
	open.Proxy = "http://" + p.Addr

	requests := []Request{
		{Method: "GET", Path: "/x", Headers: map[string]string{"Host": "evil.example"}},
		{Method: "GET", Path: "/x", Headers: map[string]string{"Proxy-Authorization": "Basic ZXZpbDpldmls"}},
		{Method: "GET", Path: "/x", Headers: map[string]string{"Proxy-Connection": "keep-alive"}},
		{Method: "CONNECT", Path: "evil.example:443"},
		{Method: "GET", Path: "http://evil.example/x"},
		{Method: "GET", Path: "//evil.example/x"},
		{Method: "GET", Path: "/x@evil.example"},
		{Method: "GET", Path: "/%2F%2Fevil.example/x"},
		{Method: "GET", Path: "evil.example:443/x"},
		{Method: "GET", Path: "/x HTTP/1.1\r\nHost: evil.example\r\n\r\nGET /y"},
	}
	for _, e := range []*Endpoint{secure, open} {
		for _, r := range requests {
			res, err := c.Do(ctx, e, r, io.Discard)
			if err == nil && res.Status != StatusOK && res.Status != StatusHTTPError {
				t.Errorf("%s %q %v: %s %s", r.Method, r.Path, r.Headers, res.Status, res.Reason)
			}
			checkNoSecret(t, logs, res)
		}
	}
	// A last request on each, so that tinyproxy has logged every line
	// before this one when it logs this one.
	for _, e := range []*Endpoint{secure, open} {
		if res, err := c.Do(ctx, e, Request{Method: "GET", Path: "/last"}, io.Discard); err != nil || res.Status != StatusOK {
			t.Fatalf("Do = %+v, %v; want ok", res, err)
		}
	}
	p.WaitRequest(t, "GET "+plain.URL+"/api/last ")
	for _, l := range p.Requests() {
		if !strings.HasPrefix(l, "CONNECT "+srv.Listener.Addr().String()+" ") && !strings.HasPrefix(l, "GET "+plain.URL+"/api/") {
			t.Errorf("the proxy read %q; want only the configured origins", l)
		}
	}
	sent := strings.ToLower(p.Sent())
	for _, bad := range []string{strings.ToLower(testToken), "host: evil", "connect evil", "http://evil", "proxy-authorization"} {
		if strings.Contains(sent, bad) {
			t.Errorf("the proxy got %q:\n%s", bad, sent)
		}
	}
}

// TestProxy covers the proxy with a proxy in Go that resolves names no DNS
// knows: names are resolved by the proxy and not checked; literal and
// localhost hosts are; the proxy's own address passes the guard with
// private allowed; a refused CONNECT, an unreachable proxy and a change of
// proxy.
func TestProxy(t *testing.T) {
	srv, roots := proxiedServer(t, tlstest.ServerOptions{Names: []string{"api.example", "direct.example"}})
	real := srv.Listener.Addr().String()
	_, port, _ := net.SplitHostPort(real)
	mapping := func(hostport string) string {
		if strings.HasPrefix(hostport, "deny.example:") {
			return ""
		}
		return real
	}
	p1, p2 := proxytest.StartGo(t, mapping), proxytest.StartGo(t, mapping)
	c, logs := newTestClient(t)
	c.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		if strings.HasSuffix(host, ".example") {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return resolve(ctx, host)
	}
	closed := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	ctx := context.Background()

	tests := []struct {
		name    string
		base    string
		private bool
		proxy   string
		via     *proxytest.Proxy // the proxy that must have seen it, if any
		want    string           // "" for ok, else part of the reason or error
		blocked string           // the range of a *BlockedAddressError
	}{
		{"a name is resolved by the proxy", "https://api.example", false, p1.Addr, p1, "", ""},
		{"the same endpoint through another proxy", "https://api.example", false, p2.Addr, p2, "", ""},
		{"and without one again", "https://direct.example:" + port, true, "", nil, "", ""},
		{"without one, the guard checks the name", "https://direct.example:" + port, false, "", nil, "loopback", "loopback"},
		{"a literal loopback address", "https://127.0.0.1:" + port, false, p1.Addr, nil, "loopback", "loopback"},
		{"a literal loopback address allowed", "https://127.0.0.1:" + port, true, p1.Addr, p1, "", ""},
		{"localhost", "https://localhost:" + port, false, p1.Addr, nil, "loopback", "loopback"},
		{"a metadata address", "https://169.254.169.254", true, p1.Addr, nil, "link-local", "link-local"},
		{"IPv4-mapped metadata", "https://[::ffff:169.254.169.254]", true, p1.Addr, nil, "link-local", "link-local"},
		{"CONNECT refused", "https://deny.example", false, p1.Addr, p1,
			"the proxy " + p1.Addr + " refused CONNECT deny.example:443: 403 Forbidden", ""},
		{"proxy unreachable", "https://api.example", false, closed, nil, "the proxy " + closed + ": ", ""},
		{"proxy on a link-local address", "https://api.example", false, "169.254.10.10:3128", nil, "the proxy 169.254.10.10:3128: ", "link-local"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Retries allowed: what cannot change is not retried.
			e := &Endpoint{Name: "api", BaseURL: tt.base, Auth: bearer(), AllowPrivate: tt.private, RootCAs: roots,
				Retry: RetryPolicy{MaxAttempts: 3}}
			if tt.proxy != "" {
				e.Proxy = "http://" + tt.proxy
			}
			marks := []int{len(p1.Conns()), len(p2.Conns())}
			var body bytes.Buffer
			res, err := c.Do(ctx, e, Request{Method: "GET", Path: "/x"}, &body)
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			checkNoSecret(t, logs, res)
			switch {
			case tt.want == "" && res.Status != StatusOK:
				t.Fatalf("Do = %s %s; want ok", res.Status, res.Reason)
			case tt.want == "" && !strings.HasPrefix(body.String(), "auth=Bearer "+testToken):
				t.Errorf("the server got %q; want the credential", body.String())
			case tt.want != "" && (res.Status != StatusFailed || !strings.Contains(res.Reason, tt.want)):
				t.Fatalf("Do = %s %q; want failed with %q", res.Status, res.Reason, tt.want)
			}
			var blocked *BlockedAddressError
			if got := errors.As(res.Err, &blocked); got != (tt.blocked != "") || (got && blocked.Range != tt.blocked) {
				t.Errorf("Result.Err = %v; want a *BlockedAddressError %v (%s)", res.Err, tt.blocked != "", tt.blocked)
			}
			if (tt.blocked != "" || strings.Contains(tt.want, "refused CONNECT")) && res.Attempts > 1 {
				t.Errorf("%d attempts; a denied address or a proxy's refusal is not retried", res.Attempts)
			}
			for i, p := range []*proxytest.Proxy{p1, p2} {
				conns := connsSince(p, marks[i])
				switch {
				case p == tt.via && (len(conns) != 1 || !strings.HasPrefix(conns[0], "CONNECT ")):
					t.Errorf("proxy %d got %.60q; want one CONNECT", i+1, conns)
				case p != tt.via && len(conns) != 0:
					t.Errorf("proxy %d got %.60q; want nothing", i+1, conns)
				}
				if sent := p.Sent(); strings.Contains(sent, testToken) || strings.Contains(sent, "Authorization") {
					t.Errorf("proxy %d got the credential", i+1)
				}
			}
		})
	}
}

// TestProxyFromEnvironment: use_env_proxy honours HTTPS_PROXY, HTTP_PROXY
// and NO_PROXY; a plain http request with a credential that HTTP_PROXY
// would carry is refused, one without goes through; an address with a
// password is refused without being quoted.
func TestProxyFromEnvironment(t *testing.T) {
	srv, roots := proxiedServer(t, tlstest.ServerOptions{Names: []string{"api.example", "direct.example"}})
	plain := newEchoServer(t)
	real, plainReal := srv.Listener.Addr().String(), plain.Listener.Addr().String()
	p := proxytest.StartGo(t, func(hostport string) string {
		if strings.HasPrefix(hostport, "plain.example") {
			return plainReal
		}
		return real
	})
	_, port, _ := net.SplitHostPort(real)
	c, logs := newTestClient(t)
	c.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	ctx := context.Background()
	tests := []struct {
		name                      string
		httpsProxy, httpProxy, no string
		base                      string
		auth                      Auth
		viaProxy                  bool
		want                      string // "" for ok, else part of the reason
	}{
		{"https through HTTPS_PROXY", "http://" + p.Addr, "", "", "https://api.example", bearer(), true, ""},
		{"host:port form", p.Addr, "", "", "https://api.example", bearer(), true, ""},
		{"NO_PROXY lists it", "http://" + p.Addr, "", "direct.example", "https://direct.example:" + port, bearer(), false, ""},
		{"NO_PROXY lists its domain", "http://" + p.Addr, "", ".example", "https://direct.example:" + port, bearer(), false, ""},
		{"NO_PROXY lists another", "http://" + p.Addr, "", "other.example", "https://api.example", bearer(), true, ""},
		{"loopback is never proxied", "http://" + p.Addr, "", "", "https://127.0.0.1:" + port, bearer(), false, ""},
		{"HTTP_PROXY only", "", "http://" + p.Addr, "", "https://direct.example:" + port, bearer(), false, ""},
		{"plain http without a credential", "", "http://" + p.Addr, "", "http://plain.example/api", Auth{}, true, ""},
		{"plain http with a credential", "", "http://" + p.Addr, "", "http://plain.example/api", bearer(), false,
			"a plain http:// request through the proxy " + p.Addr + " would carry the endpoint's credential"},
		{"a password in HTTPS_PROXY", "http://user:hunter2@" + p.Addr, "", "", "https://api.example", bearer(), false,
			"HTTPS_PROXY (or https_proxy) in actiongw's environment must not contain a user name or password"},
		{"an https proxy", "https://" + p.Addr, "", "", "https://api.example", bearer(), false, "must start with http://"},
		{"a proxy without a port", "http://proxy.example", "", "", "https://api.example", bearer(), false, "must name a port"},
		{"a bad HTTP_PROXY does not matter to https", "http://" + p.Addr, "socks5://x:1", "", "https://api.example", bearer(), true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"} {
				t.Setenv(k, "")
			}
			t.Setenv("HTTPS_PROXY", tt.httpsProxy)
			t.Setenv("HTTP_PROXY", tt.httpProxy)
			t.Setenv("NO_PROXY", tt.no)
			e := &Endpoint{Name: "env", BaseURL: tt.base, Auth: tt.auth, AllowPrivate: true, RootCAs: roots,
				ProxyFromEnvironment: true}
			mark := len(p.Conns())
			res, err := c.Do(ctx, e, Request{Method: "GET", Path: "/x"}, io.Discard)
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			checkNoSecret(t, logs, res)
			if strings.Contains(res.Reason, "hunter2") || strings.Contains(logs.String(), "hunter2") {
				t.Errorf("the proxy password was quoted: %s", res.Reason)
			}
			switch {
			case tt.want == "" && res.Status != StatusOK:
				t.Fatalf("Do = %s %s; want ok", res.Status, res.Reason)
			case tt.want != "" && (res.Status != StatusFailed || !strings.Contains(res.Reason, tt.want)):
				t.Fatalf("Do = %s %q; want failed with %q", res.Status, res.Reason, tt.want)
			case tt.want != "" && res.Attempts > 1:
				t.Errorf("%d attempts; a refused proxy setting is not retried", res.Attempts)
			}
			var pe *ProxyError
			if tt.want != "" && !errors.As(res.Err, &pe) {
				t.Errorf("Result.Err = %v; want a *ProxyError", res.Err)
			}
			if conns := connsSince(p, mark); (len(conns) != 0) != tt.viaProxy {
				t.Errorf("the proxy got %.60q; want a request through it: %v", conns, tt.viaProxy)
			}
			if strings.Contains(p.Sent(), testToken) {
				t.Errorf("the proxy got the credential")
			}
			if got := ProxyFor("", true, tt.base); (got != "") != tt.viaProxy && tt.want == "" {
				t.Errorf("ProxyFor = %q; want a proxy: %v", got, tt.viaProxy)
			}
		})
	}
}

func TestCheckProxy(t *testing.T) {
	tests := []struct {
		name                 string
		proxy                string
		fromEnv              bool
		base, tokenURL, auth string
		field, want          string // "" for no error
	}{
		{"none", "", false, "http://a.example", "", AuthBearer, "", ""},
		{"from the environment", "", true, "http://a.example", "", AuthBearer, "", ""},
		{"https endpoint", "http://127.0.0.1:3128", false, "https://a.example", "", AuthBearer, "", ""},
		{"a name", "http://proxy.corp.example:8080/", false, "https://a.example", "", AuthBasic, "", ""},
		{"IPv6", "http://[::1]:3128", false, "https://a.example", "", AuthBearer, "", ""},
		{"plain http without a credential", "http://127.0.0.1:3128", false, "http://a.example", "", AuthNone, "", ""},
		{"plain http, auth unset", "http://127.0.0.1:3128", false, "http://a.example", "", "", "", ""},
		{"both", "http://127.0.0.1:3128", true, "https://a.example", "", AuthBearer, "proxy", "not both"},
		{"plain http with a credential", "http://127.0.0.1:3128", false, "http://a.example", "", AuthBearer, "proxy", "base_url is plain http://"},
		{"plain http with a query credential", "http://127.0.0.1:3128", false, "HTTP://a.example", "", AuthQuery, "proxy", "base_url is plain http://"},
		{"plain http token URL", "http://127.0.0.1:3128", false, "https://a.example", "http://127.0.0.1:9/token", AuthOAuth2ClientCredentials, "token_url", "plain http://"},
		{"a password", "http://u:hunter2@127.0.0.1:3128", false, "https://a.example", "", AuthBearer, "proxy", "user name or password"},
		{"a user", "http://u@127.0.0.1:3128", false, "https://a.example", "", AuthBearer, "proxy", "user name or password"},
		{"https proxy", "https://proxy.example:443", false, "https://a.example", "", AuthBearer, "proxy", "must start with http://"},
		{"socks proxy", "socks5://127.0.0.1:1080", false, "https://a.example", "", AuthBearer, "proxy", "must start with http://"},
		{"no scheme", "127.0.0.1:3128", false, "https://a.example", "", AuthBearer, "proxy", "http://"},
		{"no port", "http://proxy.example", false, "https://a.example", "", AuthBearer, "proxy", "must name a port"},
		{"bad port", "http://proxy.example:99999", false, "https://a.example", "", AuthBearer, "proxy", "invalid port"},
		{"a path", "http://proxy.example:3128/x", false, "https://a.example", "", AuthBearer, "proxy", "without a path"},
		{"a query", "http://proxy.example:3128?x=1", false, "https://a.example", "", AuthBearer, "proxy", "without a path"},
		{"no host", "http://:3128", false, "https://a.example", "", AuthBearer, "proxy", "must name a host"},
		{"not ASCII", "http://pröxy.example:3128", false, "https://a.example", "", AuthBearer, "proxy", "ASCII"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckProxy(tt.proxy, tt.fromEnv, tt.base, tt.tokenURL, tt.auth)
			var ee *EndpointError
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("CheckProxy = %v; want nil", err)
			case tt.want == "":
			case !errors.As(err, &ee) || ee.Field != tt.field || !strings.Contains(ee.Reason, tt.want):
				t.Fatalf("CheckProxy = %v; want an *EndpointError on %s with %q", err, tt.field, tt.want)
			case strings.Contains(err.Error(), "hunter2"):
				t.Errorf("the error quotes the password: %v", err)
			}
			// Endpoint.Validate says the same, naming the endpoint.
			e := &Endpoint{Name: "x", BaseURL: tt.base, Auth: Auth{Kind: tt.auth, Param: "k"}, Proxy: tt.proxy,
				ProxyFromEnvironment: tt.fromEnv, AllowPrivate: true}
			if tt.tokenURL != "" {
				e.Auth.OAuth2 = &OAuth2{TokenURL: tt.tokenURL, ClientID: "c"}
			}
			verr := e.Validate()
			if (verr == nil) != (err == nil) || (verr != nil && !strings.Contains(verr.Error(), `endpoint "x": `+tt.field+": ")) {
				t.Errorf("Validate = %v; want %v for endpoint x", verr, err)
			}
		})
	}
}

// TestProbeThroughProxy: check reaches an https origin with CONNECT and a
// TLS handshake through the proxy, and only the proxy for a plain http
// one; a refusal says which proxy refused.
func TestProbeThroughProxy(t *testing.T) {
	srv, roots := proxiedServer(t, tlstest.ServerOptions{Names: []string{"api.example"}})
	p := proxytest.StartGo(t, func(hostport string) string {
		if hostport == "api.example:443" {
			return srv.Listener.Addr().String()
		}
		return ""
	})
	c, _ := newTestClient(t)
	ctx := context.Background()
	tests := []struct {
		name, base string
		roots      *x509.CertPool
		request    string // the request line the proxy must read, if any
		want       string // "" for success, else part of the error
	}{
		{"https", "https://api.example/v1", roots, "CONNECT api.example:443 HTTP/1.1", ""},
		{"https with an unknown CA", "https://api.example", nil, "CONNECT api.example:443 HTTP/1.1", "unknown authority"},
		{"refused", "https://other.example", roots, "CONNECT other.example:443 HTTP/1.1", "the proxy " + p.Addr + " refused CONNECT other.example:443: 403"},
		{"plain http reaches the proxy only", "http://plain.example", nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(p.Requests())
			err := c.Probe(ctx, &Endpoint{Name: "p", BaseURL: tt.base, RootCAs: tt.roots, Proxy: "http://" + p.Addr})
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Probe = %v; want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Probe = %v; want an error with %q", err, tt.want)
			}
			got := p.Requests()[before:]
			if (tt.request == "" && len(got) != 0) || (tt.request != "" && (len(got) != 1 || got[0] != tt.request)) {
				t.Errorf("the proxy read %q; want %q", got, tt.request)
			}
		})
	}
}

// TestProxyTransportPerSetting: the transport of an endpoint is kept while
// its proxy setting is, and replaced when it changes.
func TestProxyTransportPerSetting(t *testing.T) {
	c, _ := newTestClient(t)
	base, _ := parseBaseURL("https://api.example")
	e := &Endpoint{Name: "a", BaseURL: "https://api.example", Proxy: "http://127.0.0.1:3128"}
	first := c.transport(e, base)
	if c.transport(e, base) != first {
		t.Errorf("the same setting made a new transport")
	}
	for _, change := range []func(){
		func() { e.Proxy = "http://127.0.0.1:3129" },
		func() { e.Proxy, e.ProxyFromEnvironment = "", true },
		func() { e.Auth.Kind = AuthBearer }, // a plain http request may now be refused
		func() { t.Setenv("HTTPS_PROXY", "http://127.0.0.1:3130") },
		func() { t.Setenv("NO_PROXY", "api.example") },
		func() { e.ProxyFromEnvironment = false },
	} {
		prev := c.transport(e, base)
		change()
		if c.transport(e, base) == prev {
			t.Errorf("a change of the proxy setting kept the transport")
		}
	}
}

// TestProxiedLiteralAddressForms: the proxy resolves the host with
// getaddrinfo, which reads the inet_aton forms of an IPv4 address too
// ("127.1", "2130706433", "0x7f.0.0.1"): they are checked as the address
// they are, so without allow_private none reaches loopback through
// Debian's tinyproxy. (Found by helper-21's review.)
func TestProxiedLiteralAddressForms(t *testing.T) {
	p := proxytest.StartTinyproxy(t)
	srv := newEchoServer(t)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	c, _ := newTestClient(t)
	for _, host := range []string{"127.1", "2130706433", "0x7f.0.0.1"} {
		t.Run(host, func(t *testing.T) {
			e := testEndpoint(srv.Server, Auth{})
			e.Name, e.BaseURL, e.AllowPrivate, e.Proxy = host, "http://"+net.JoinHostPort(host, port)+"/api", false, "http://"+p.Addr
			res, err := c.Do(context.Background(), e, Request{Method: "GET", Path: "/x"}, io.Discard)
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			var blocked *BlockedAddressError
			if !errors.As(res.Err, &blocked) {
				t.Errorf("Do = %s (HTTP %d) %s; want a *BlockedAddressError (loopback) before anything is sent", res.Status, res.HTTPStatus, res.Reason)
			}
		})
	}
}

func TestInetAton(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" for invalid
	}{
		{"127.0.0.1", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"2130706433", "127.0.0.1"},
		{"0x7f.0.0.1", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"10.1.2", "10.1.0.2"},
		{"0xa9fea9fe", "169.254.169.254"},
		{"256.0.0.1", ""},
		{"1.2.3.4.5", ""},
		{"4294967296", ""},
		{"08.0.0.1", ""},
		{"0x", ""},
		{"1..2", ""},
		{"0b1.0.0.1", ""},
		{"1_0.0.0.1", ""},
	}
	for _, tt := range tests {
		a, ok := inetAton(tt.in)
		if got := map[bool]string{true: a.String()}[ok]; got != tt.want {
			t.Errorf("inetAton(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}
