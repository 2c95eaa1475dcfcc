package httpact

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
)

const testToken = "tok-3f9a61c7-SECRET"

// testEndpoint points at srv under /api, may reach loopback, allows every
// common method and retries fast.
func testEndpoint(srv *httptest.Server, auth Auth) *Endpoint {
	return &Endpoint{
		Name:         "test",
		BaseURL:      srv.URL + "/api",
		Auth:         auth,
		AllowPrivate: true,
		Retry:        RetryPolicy{MaxAttempts: 3, WaitMin: time.Millisecond, WaitMax: 5 * time.Millisecond},
		// What the gateway's configuration returns unless told otherwise.
		ResponseHeaders: []string{"Content-Type", "Content-Length", "Location", "Retry-After", "ETag", "X-Request-Id", "Request-Id"},
	}
}

func bearer() Auth { return Auth{Kind: AuthBearer, Token: []byte(testToken)} }

var errDenied = errors.New("denied by the test policy")

// allowOnly stands in for the gateway's policy: the methods listed
// (space-separated) on the paths under the prefixes given.
func allowOnly(methods string, prefixes ...string) func(method, path string) error {
	return func(method, path string) error {
		if !strings.Contains(" "+methods+" ", " "+method+" ") {
			return errDenied
		}
		for _, p := range prefixes {
			if path == p || strings.HasPrefix(path, strings.TrimSuffix(p, "/")+"/") {
				return nil
			}
		}
		return errDenied
	}
}

// checkNoSecret fails if the token or a query string shows up where the
// agent or the logs would see it.
func checkNoSecret(t *testing.T, logs *syncbuf.Buffer, res *Result) {
	t.Helper()
	if res != nil {
		for _, s := range []string{res.Reason, res.URL} {
			if strings.Contains(s, testToken) || strings.Contains(s, "?") {
				t.Errorf("result text %q contains the token or a query string", s)
			}
		}
	}
	if l := logs.String(); strings.Contains(l, testToken) || strings.Contains(l, "api_key") {
		t.Errorf("logs contain the token or the query credential:\n%s", l)
	}
}

func TestCredentialInjection(t *testing.T) {
	tests := []struct {
		name string
		auth Auth
		got  func(r *http.Request) string
		want string
	}{
		{"bearer", bearer(), func(r *http.Request) string { return r.Header.Get("Authorization") }, "Bearer " + testToken},
		{"basic", Auth{Kind: AuthBasic, User: []byte("deploy"), Password: []byte(testToken)},
			func(r *http.Request) string { u, p, _ := r.BasicAuth(); return u + ":" + p }, "deploy:" + testToken},
		{"header", Auth{Kind: AuthHeader, Header: "X-Api-Key", Token: []byte(testToken)},
			func(r *http.Request) string { return r.Header.Get("X-Api-Key") }, testToken},
		{"query", Auth{Kind: AuthQuery, Param: "api_key", Token: []byte(testToken)},
			func(r *http.Request) string { return r.URL.Query().Get("api_key") }, testToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got, gotQuery string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got, gotQuery = tt.got(r), r.URL.Query().Get("q")
				io.WriteString(w, "hello")
			}))
			defer srv.Close()
			c, logs := newTestClient(t)
			var body bytes.Buffer
			res, err := c.Do(context.Background(), testEndpoint(srv, tt.auth),
				Request{Method: "get", Path: "/things", Query: url.Values{"q": {"a b"}}}, &body)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != StatusOK || res.HTTPStatus != 200 || body.String() != "hello" || res.BodyBytes != 5 {
				t.Errorf("got %+v, body %q; want ok 200 \"hello\"", res, body.String())
			}
			if got != tt.want || gotQuery != "a b" {
				t.Errorf("server got credential %q, q=%q; want %q, q=\"a b\"", got, gotQuery, tt.want)
			}
			checkNoSecret(t, logs, res)
		})
	}
}

func TestRedirects(t *testing.T) {
	var otherHits atomic.Int32
	var otherAuth atomic.Value
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
		otherAuth.Store(r.Header.Get("Authorization") + r.URL.RawQuery)
	}))
	defer other.Close()

	var landedAuth atomic.Value
	mux := http.NewServeMux()
	mux.HandleFunc("/api/here", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/api/landing", http.StatusFound)
	})
	mux.HandleFunc("/api/landing", func(w http.ResponseWriter, r *http.Request) {
		landedAuth.Store(r.Header.Get("Authorization"))
		io.WriteString(w, "landed")
	})
	mux.HandleFunc("/api/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/api/away-by-name", func(w http.ResponseWriter, r *http.Request) {
		// Same port, other host name: another origin.
		http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/steal", http.StatusFound)
	})
	mux.HandleFunc("/api/outside", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/admin", http.StatusFound)
	})
	mux.HandleFunc("/api/to-private", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/api/private/x", http.StatusFound)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "outside the base") })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	tests := []struct {
		name, follow, path string
		paths              []string
		wantStatus         int
		wantLocation       string // "" means the body must be "landed"
	}{
		{"not followed by default", "", "/here", nil, 302, "/api/landing"},
		{"not followed with none", RedirectsNone, "/here", nil, 302, "/api/landing"},
		{"same origin followed", RedirectsSameOrigin, "/here", nil, 200, ""},
		{"other origin returned", RedirectsSameOrigin, "/away", nil, 307, other.URL + "/steal"},
		{"other host name returned", RedirectsSameOrigin, "/away-by-name", nil, 302, "localhost"},
		{"outside base path returned", RedirectsSameOrigin, "/outside", nil, 302, "/admin"},
		{"outside path patterns returned", RedirectsSameOrigin, "/to-private", []string{"/to-private", "/here", "/landing"}, 302, "/api/private/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			landedAuth.Store("")
			c, logs := newTestClient(t)
			e := testEndpoint(srv, bearer())
			e.FollowRedirects = tt.follow
			if tt.paths != nil {
				e.Allow = allowOnly("GET", tt.paths...)
			}
			var body bytes.Buffer
			res, err := c.Do(context.Background(), e, Request{Method: "GET", Path: tt.path}, &body)
			if err != nil {
				t.Fatal(err)
			}
			if res.HTTPStatus != tt.wantStatus {
				t.Fatalf("status %d (%s); want %d", res.HTTPStatus, res.Reason, tt.wantStatus)
			}
			if tt.wantLocation == "" {
				if body.String() != "landed" || landedAuth.Load() != "Bearer "+testToken {
					t.Errorf("body %q, credential at landing %q; want landed with the credential", body.String(), landedAuth.Load())
				}
			} else if loc := res.Headers["location"]; !strings.Contains(loc, tt.wantLocation) {
				t.Errorf("location %q; want it to contain %q", loc, tt.wantLocation)
			}
			checkNoSecret(t, logs, res)
		})
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the other origin got %d requests (last credential %q); want none", n, otherAuth.Load())
	}
}

// TestRedirectLeaks follows redirects with each kind of credential: a
// same-origin hop carries no Referer, which net/http fills with the
// previous URL, the query credential included; a hop to another origin is
// not taken, though net/http would copy a custom credential header to it.
func TestRedirectLeaks(t *testing.T) {
	type hop struct{ referer, query, auth, apiKey string }
	landed := make(chan hop, 1)
	var otherHits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { otherHits.Add(1) }))
	defer other.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("/api/here", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/api/landing", http.StatusFound)
	})
	mux.HandleFunc("/api/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/api/landing", func(w http.ResponseWriter, r *http.Request) {
		landed <- hop{r.Header.Get("Referer"), r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("X-Api-Key")}
		io.WriteString(w, "landed")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, logs := newTestClient(t)
	tests := []struct {
		name    string
		auth    Auth
		headers map[string]string
		want    hop // at the landing; Referer always empty
	}{
		{"query", Auth{Kind: AuthQuery, Param: "api_key", Token: []byte(testToken)}, nil, hop{}},
		{"bearer with the agent's own Referer", bearer(), map[string]string{"Referer": "https://agent.example/?x=1"}, hop{auth: "Bearer " + testToken}},
		{"header", Auth{Kind: AuthHeader, Header: "X-Api-Key", Token: []byte(testToken)}, nil, hop{apiKey: testToken}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := testEndpoint(srv, tt.auth)
			e.FollowRedirects = RedirectsSameOrigin
			var body bytes.Buffer
			res, err := c.Do(context.Background(), e, Request{Method: "GET", Path: "/here", Headers: tt.headers}, &body)
			if err != nil || res.Status != StatusOK || body.String() != "landed" {
				t.Fatalf("%+v, %v, %q; want landed", res, err, body.String())
			}
			if got := <-landed; got != tt.want {
				t.Errorf("the hop carried %+v; want %+v", got, tt.want)
			}
			res, err = c.Do(context.Background(), e, Request{Method: "GET", Path: "/away", Headers: tt.headers}, io.Discard)
			if err != nil || res.HTTPStatus != http.StatusTemporaryRedirect {
				t.Errorf("%+v, %v; want the 307 returned", res, err)
			}
			checkNoSecret(t, logs, res)
		})
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the other origin got %d requests; want none", n)
	}
}

func TestBadLocationNotQuoted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/x%zz?token="+testToken)
		w.WriteHeader(http.StatusFound)
	}))
	defer srv.Close()
	c, logs := newTestClient(t)
	res, err := c.Do(context.Background(), testEndpoint(srv, bearer()), Request{Method: "GET"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusFailed || !strings.Contains(res.Reason, "Location header is not a valid URL") {
		t.Errorf("got %s %q; want failed naming the Location header", res.Status, res.Reason)
	}
	checkNoSecret(t, logs, res)
}

func TestRequestRefused(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	c, logs := newTestClient(t)

	const evil = "EVIL-VALUE"
	tests := []struct {
		name  string
		auth  Auth
		edit  func(*Endpoint)
		req   Request
		field string
	}{
		{"dotdot escape", bearer(), nil, Request{Path: "/../admin"}, "path"},
		{"encoded dotdot escape", bearer(), nil, Request{Path: "/%2e%2e/admin"}, "path"},
		{"host reference", bearer(), nil, Request{Path: "//evil.example/" + evil}, "path"},
		{"absolute URL", bearer(), nil, Request{Path: "http://evil.example/" + evil}, "path"},
		{"CRLF in path", bearer(), nil, Request{Path: "/x\r\nX-" + evil + ": 1"}, "path"},
		{"encoded CRLF in path", bearer(), nil, Request{Path: "/x%0d%0aX-" + evil}, "path"},
		{"CRLF in query value", bearer(), nil, Request{Query: url.Values{"a": {"1\r\n" + evil}}}, "query"},
		{"control in query name", bearer(), nil, Request{Query: url.Values{"a\x00": {"1"}}}, "query"},
		{"query credential override", Auth{Kind: AuthQuery, Param: "api_key", Token: []byte(testToken)}, nil,
			Request{Query: url.Values{"API_KEY": {evil}}}, "query"},
		{"Authorization", bearer(), nil, Request{Headers: map[string]string{"Authorization": "Bearer " + evil}}, "headers"},
		{"authorization lower case", bearer(), nil, Request{Headers: map[string]string{"authorization": evil}}, "headers"},
		{"Cookie", bearer(), nil, Request{Headers: map[string]string{"Cookie": evil}}, "headers"},
		{"Host", bearer(), nil, Request{Headers: map[string]string{"Host": "evil.example"}}, "headers"},
		{"Proxy-Authorization", bearer(), nil, Request{Headers: map[string]string{"Proxy-Authorization": evil}}, "headers"},
		{"Proxy-anything", bearer(), nil, Request{Headers: map[string]string{"proxy-connection": evil}}, "headers"},
		{"Transfer-Encoding", bearer(), nil, Request{Headers: map[string]string{"Transfer-Encoding": "chunked"}}, "headers"},
		{"Content-Length", bearer(), nil, Request{Headers: map[string]string{"Content-Length": "0"}}, "headers"},
		{"injected header", Auth{Kind: AuthHeader, Header: "X-Api-Key", Token: []byte(testToken)}, nil,
			Request{Headers: map[string]string{"x-api-key": evil}}, "headers"},
		{"CRLF in header value", bearer(), nil, Request{Headers: map[string]string{"X-Ok": "a\r\nAuthorization: " + evil}}, "headers"},
		{"LF in header value", bearer(), nil, Request{Headers: map[string]string{"X-Ok": "a\n" + evil}}, "headers"},
		{"NUL in header value", bearer(), nil, Request{Headers: map[string]string{"X-Ok": "a\x00" + evil}}, "headers"},
		{"CRLF in header name", bearer(), nil, Request{Headers: map[string]string{"X-Ok\r\nX-" + evil: "1"}}, "headers"},
		{"not in allowlist", bearer(), func(e *Endpoint) { e.HeaderAllow = []string{"Accept", "X-Gh-*"} },
			Request{Headers: map[string]string{"X-Other": evil}}, "headers"},
		{"in denylist", bearer(), func(e *Endpoint) { e.HeaderDeny = []string{"X-Forwarded-*"} },
			Request{Headers: map[string]string{"X-Forwarded-For": evil}}, "headers"},
		{"method not a token", bearer(), nil, Request{Method: "GET /x HTTP/1.1\r\n"}, "method"},
		{"CONNECT", bearer(), nil, Request{Method: "CONNECT"}, "method"},
		{"body too large", bearer(), func(e *Endpoint) { e.MaxRequestBody = 8 }, Request{Method: "POST", Body: []byte("123456789")}, "body"},
		{"invalid JSON", bearer(), nil, Request{Method: "POST", Body: []byte("{" + evil), JSON: true}, "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := testEndpoint(srv, tt.auth)
			if tt.edit != nil {
				tt.edit(e)
			}
			if tt.req.Method == "" {
				tt.req.Method = "GET"
			}
			res, err := c.Do(context.Background(), e, tt.req, io.Discard)
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("Do = %+v, %v; want a *RequestError", res, err)
			}
			if re.Field != tt.field {
				t.Errorf("field %q; want %q (%v)", re.Field, tt.field, err)
			}
			if msg := err.Error(); strings.Contains(msg, evil) || strings.Contains(msg, testToken) || strings.ContainsAny(msg, "\r\n\x00") {
				t.Errorf("error %q echoes a value", msg)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("server got %d requests; want none", n)
	}
	checkNoSecret(t, logs, nil)
}

// TestAllowConsulted checks that the endpoint's policy sees the normalized
// method and path, and that its refusal comes back as is with nothing sent.
func TestAllowConsulted(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	c, _ := newTestClient(t)
	tests := []struct {
		method, path         string
		wantMethod, wantPath string
		allowed              bool
	}{
		{"get", "/repos/o/r/", "GET", "/repos/o/r", true},
		{"GET", "/repos/./o/../x", "GET", "/repos/x", true},
		{"GET", "/repos/../admin", "GET", "/admin", false},
		{"GET", "/repos/a%20b", "GET", "/repos/a b", true},
		{"GET", "/repos%2Fx", "GET", "/repos/x", true},
		{"DELETE", "/repos/o", "DELETE", "/repos/o", false},
	}
	for _, tt := range tests {
		var gotMethod, gotPath string
		e := testEndpoint(srv, bearer())
		e.Allow = func(method, path string) error {
			gotMethod, gotPath = method, path
			return allowOnly("GET", "/repos")(method, path)
		}
		before := hits.Load()
		res, err := c.Do(context.Background(), e, Request{Method: tt.method, Path: tt.path}, io.Discard)
		if gotMethod != tt.wantMethod || gotPath != tt.wantPath {
			t.Errorf("%s %s: policy asked about %s %q; want %s %q", tt.method, tt.path, gotMethod, gotPath, tt.wantMethod, tt.wantPath)
		}
		switch {
		case tt.allowed && (err != nil || res.Status != StatusOK):
			t.Errorf("%s %s: %+v, %v; want ok", tt.method, tt.path, res, err)
		case !tt.allowed && (!errors.Is(err, errDenied) || hits.Load() != before):
			t.Errorf("%s %s: %v with %d requests sent; want the policy's error and none sent", tt.method, tt.path, err, hits.Load()-before)
		}
	}
}

func TestEndpointValidate(t *testing.T) {
	ok := Endpoint{Name: "x", BaseURL: "https://api.example.com/v1"}
	tests := []struct {
		name  string
		edit  func(*Endpoint)
		field string // "" means valid
	}{
		{"valid", func(e *Endpoint) {}, ""},
		{"valid root with slash", func(e *Endpoint) { e.BaseURL = "http://[::1]:8080/" }, ""},
		{"no name", func(e *Endpoint) { e.Name = "" }, "name"},
		{"ftp", func(e *Endpoint) { e.BaseURL = "ftp://h/" }, "base_url"},
		{"userinfo", func(e *Endpoint) { e.BaseURL = "https://user:" + testToken + "@h/" }, "base_url"},
		{"query", func(e *Endpoint) { e.BaseURL = "https://h/?a=1" }, "base_url"},
		{"fragment", func(e *Endpoint) { e.BaseURL = "https://h/#x" }, "base_url"},
		{"no host", func(e *Endpoint) { e.BaseURL = "https:///x" }, "base_url"},
		{"bad port", func(e *Endpoint) { e.BaseURL = "https://h:99999/" }, "base_url"},
		{"dot segment", func(e *Endpoint) { e.BaseURL = "https://h/a/../b" }, "base_url"},
		{"negative body limit", func(e *Endpoint) { e.MaxResponseBody = -1 }, "max_response_body"},
		{"follow all", func(e *Endpoint) { e.FollowRedirects = "all" }, "follow_redirects"},
		{"bad header name", func(e *Endpoint) { e.HeaderAllow = []string{"X Y"} }, "header_allow"},
		{"auth kind", func(e *Endpoint) { e.Auth.Kind = "oauth" }, "auth"},
		{"auth header Cookie", func(e *Endpoint) { e.Auth = Auth{Kind: AuthHeader, Header: "Cookie"} }, "auth"},
		{"auth query no param", func(e *Endpoint) { e.Auth = Auth{Kind: AuthQuery} }, "auth"},
		{"retry min over max", func(e *Endpoint) { e.Retry = RetryPolicy{WaitMin: time.Second, WaitMax: time.Millisecond} }, "retry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ok
			tt.edit(&e)
			err := e.Validate()
			var ee *EndpointError
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("Validate() = %v; want nil", err)
			case tt.field != "" && (!errors.As(err, &ee) || ee.Field != tt.field):
				t.Errorf("Validate() = %v; want an *EndpointError for %s", err, tt.field)
			case err != nil && strings.Contains(err.Error(), testToken):
				t.Errorf("error %q contains the secret", err)
			}
		})
	}
}

func TestSecretsChecked(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the server got a request")
	}))
	defer srv.Close()
	c, _ := newTestClient(t)
	for _, auth := range []Auth{
		{Kind: AuthBearer},
		{Kind: AuthBearer, Token: []byte(testToken + "\r\nX: y")},
		{Kind: AuthBasic, User: []byte("a:b"), Password: []byte(testToken)},
		{Kind: AuthBasic, Password: []byte(testToken)},
	} {
		_, err := c.Do(context.Background(), testEndpoint(srv, auth), Request{Method: "GET"}, io.Discard)
		var ee *EndpointError
		if !errors.As(err, &ee) || ee.Field != "auth" || strings.Contains(err.Error(), testToken) {
			t.Errorf("Do with %v = %v; want an auth *EndpointError without the secret", auth, err)
		}
	}
	if s := fmt.Sprintf("%v %+v %#v", bearer(), Endpoint{Auth: bearer()}, bearer()); strings.Contains(s, testToken) || strings.Contains(s, "116") {
		t.Errorf("formatting Auth shows the secret: %s", s)
	}
}

func TestDeniedAddresses(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, r.Host)
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	names := map[string][]netip.Addr{
		"api.test":      {netip.MustParseAddr("127.0.0.1")},
		"metadata.test": {netip.MustParseAddr("169.254.169.254")},
		"mixed.test":    {netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("127.0.0.1")},
		"private.test":  {netip.MustParseAddr("10.1.2.3")},
		"nat64.test":    {netip.MustParseAddr("64:ff9b::a9fe:a9fe")},
	}
	tests := []struct {
		name, host   string
		allowPrivate bool
		wantRange    string // "" means the request succeeds
	}{
		{"loopback IP refused", "127.0.0.1", false, "loopback"},
		{"localhost name refused", "localhost", false, "loopback"},
		{"IPv6 loopback refused", "[::1]", false, "loopback"},
		{"loopback IP opted in", "127.0.0.1", true, ""},
		{"localhost name opted in", "localhost", true, ""},
		{"name resolving to loopback opted in", "api.test", true, ""},
		{"metadata refused even opted in", "metadata.test", true, "link-local"},
		{"metadata IP refused", "169.254.169.254", true, "link-local"},
		{"IPv4-mapped metadata refused", "[::ffff:169.254.169.254]", true, "link-local"},
		{"NAT64 metadata refused", "nat64.test", true, "link-local"},
		{"unspecified refused", "0.0.0.0", true, "unspecified"},
		{"IPv6 unspecified refused", "[::]", true, "unspecified"},
		{"mixed public and loopback refused", "mixed.test", false, "loopback"},
		{"private refused", "private.test", false, "private"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, logs := newTestClient(t)
			var lookups atomic.Int32
			c.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
				lookups.Add(1)
				if a, ok := names[host]; ok {
					return a, nil
				}
				return resolve(ctx, host)
			}
			var dialled []string
			var mu sync.Mutex
			dial := c.dial
			c.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				mu.Lock()
				dialled = append(dialled, addr)
				mu.Unlock()
				return dial(ctx, network, addr)
			}
			before := hits.Load()
			e := &Endpoint{Name: "t", BaseURL: fmt.Sprintf("http://%s:%d/", tt.host, port), AllowPrivate: tt.allowPrivate}
			res, err := c.Do(context.Background(), e, Request{Method: "GET", Path: "/x"}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantRange == "" {
				if res.Status != StatusOK {
					t.Fatalf("status %s (%s); want ok", res.Status, res.Reason)
				}
				for _, a := range dialled {
					if ap, err := netip.ParseAddrPort(a); err != nil || !ap.Addr().IsLoopback() {
						t.Errorf("dialled %q; want the checked loopback address, not a name", a)
					}
				}
				if strings.HasSuffix(tt.host, ".test") && lookups.Load() != 1 {
					t.Errorf("%d lookups; want 1", lookups.Load())
				}
				return
			}
			var be *BlockedAddressError
			if res.Status != StatusFailed || !errors.As(res.Err, &be) || be.Range != tt.wantRange {
				t.Fatalf("got %s, %v; want failed with a %s *BlockedAddressError", res.Status, res.Err, tt.wantRange)
			}
			if res.Attempts != 1 || len(dialled) != 0 || hits.Load() != before {
				t.Errorf("attempts %d, dialled %v, server hits %d; want 1 attempt and nothing dialled", res.Attempts, dialled, hits.Load()-before)
			}
			if !strings.Contains(res.Reason, tt.wantRange) {
				t.Errorf("reason %q does not name the range", res.Reason)
			}
			checkNoSecret(t, logs, res)
		})
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		addr, want string
		allowable  bool
	}{
		{"127.0.0.1", "loopback", true},
		{"127.255.0.1", "loopback", true},
		{"::1", "loopback", true},
		{"::ffff:127.0.0.1", "loopback", true},
		{"10.0.0.1", "private", true},
		{"172.31.255.255", "private", true},
		{"192.168.1.1", "private", true},
		{"100.64.0.1", "shared address space", true},
		{"fd12:3456::1", "unique-local", true},
		{"169.254.169.254", "link-local", false},
		{"fe80::1%eth0", "link-local", false},
		{"fd00:ec2::254", "cloud metadata", false},
		{"100.100.100.200", "cloud metadata", false},
		{"0.0.0.0", "unspecified", false},
		{"0.1.2.3", "unspecified", false},
		{"::", "unspecified", false},
		{"224.0.0.1", "multicast", false},
		{"ff02::1", "multicast", false},
		{"255.255.255.255", "reserved", false},
		{"2002:a9fe:a9fe::1", "link-local", false},
		{"2002:7f00:1::", "loopback", true},
		{"64:ff9b::7f00:1", "loopback", true},
		{"::127.0.0.1", "IPv4-compatible", false},
		{"8.8.8.8", "", false},
		{"2001:4860:4860::8888", "", false},
		{"172.32.0.1", "", false},
	}
	for _, tt := range tests {
		r, denied := classify(netip.MustParseAddr(tt.addr))
		if tt.want == "" {
			if denied {
				t.Errorf("classify(%s) = %s; want allowed", tt.addr, r.name)
			}
			continue
		}
		if !denied || r.name != tt.want || r.allowable != tt.allowable {
			t.Errorf("classify(%s) = %q allowable=%v (denied %v); want %q allowable=%v", tt.addr, r.name, r.allowable, denied, tt.want, tt.allowable)
		}
	}
}

func TestHTTPS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("Authorization")+" "+r.Proto)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	srv.StartTLS()
	defer srv.Close()
	c, logs := newTestClient(t)

	e := testEndpoint(srv, bearer())
	res, err := c.Do(context.Background(), e, Request{Method: "GET"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusFailed || res.Attempts != 1 || !strings.Contains(res.Reason, "certificate") {
		t.Errorf("untrusted certificate: got %s after %d attempts (%s); want failed after 1", res.Status, res.Attempts, res.Reason)
	}

	e.RootCAs = x509.NewCertPool()
	e.RootCAs.AddCert(srv.Certificate())
	var body bytes.Buffer
	res, err = c.Do(context.Background(), e, Request{Method: "GET"}, &body)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusOK || body.String() != "Bearer "+testToken+" HTTP/1.1" {
		t.Errorf("got %s %q (%s); want ok with the credential", res.Status, body.String(), res.Reason)
	}
	checkNoSecret(t, logs, res)
}

// TestUnaskedContentCoding sends bodies in content codings the transport
// did not ask for and so does not decode: Do must not hand their bytes on.
func TestUnaskedContentCoding(t *testing.T) {
	deflated := func() []byte {
		var b bytes.Buffer
		fw, _ := flate.NewWriter(&b, flate.BestCompression)
		io.WriteString(fw, "token="+testToken)
		fw.Close()
		return b.Bytes()
	}()
	gzipped := func() []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		io.WriteString(zw, "token="+testToken)
		zw.Close()
		return b.Bytes()
	}()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		coding := r.URL.Query().Get("coding")
		w.Header().Set("Content-Encoding", coding)
		switch coding {
		case "deflate":
			w.Write(deflated)
		case "gzip", "gzip, gzip":
			w.Write(gzipped)
		default:
			io.WriteString(w, "opaque bytes")
		}
	}))
	defer srv.Close()
	c, logs := newTestClient(t)
	tests := []struct {
		name, method, coding string
		allow                bool
		status               Status
		wantBody             string // checked when status is ok
	}{
		{"gzip asked for and decoded", "GET", "gzip", false, StatusOK, "token=" + testToken},
		{"identity", "GET", "identity", false, StatusOK, "opaque bytes"},
		{"deflate refused", "GET", "deflate", false, StatusFailed, ""},
		{"brotli refused", "GET", "br", false, StatusFailed, ""},
		{"gzip twice on one line refused", "GET", "gzip, gzip", false, StatusFailed, ""},
		{"unknown coding refused", "GET", "x-" + testToken, false, StatusFailed, ""},
		{"HEAD has no body to refuse", "HEAD", "br", false, StatusOK, ""},
		{"deflate passed on where Accept-Encoding is allowed", "GET", "deflate", true, StatusOK, string(deflated)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := testEndpoint(srv, bearer())
			if tt.allow {
				e.AllowSpecialHeaders = []string{"Accept-Encoding"}
			}
			var body bytes.Buffer
			res, err := c.Do(context.Background(), e, Request{Method: tt.method, Query: url.Values{"coding": {tt.coding}}}, &body)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tt.status || body.String() != tt.wantBody || res.BodyBytes != int64(len(tt.wantBody)) {
				t.Errorf("got %s (%s), body %q; want %s, body %q", res.Status, res.Reason, body.String(), tt.status, tt.wantBody)
			}
			if tt.status == StatusFailed && (res.HTTPStatus != 200 || !strings.Contains(res.Reason, "did not ask for")) {
				t.Errorf("got HTTP %d, reason %q; want 200 and a reason naming the coding", res.HTTPStatus, res.Reason)
			}
			checkNoSecret(t, logs, res)
		})
	}
}
