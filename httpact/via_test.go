package httpact

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// fakeVia stands in for an SSH target: whatever address it is asked for,
// it connects to srv, as a bastion whose name for srv is that address
// would, and records what it was asked.
type fakeVia struct {
	srv *httptest.Server
	mu  sync.Mutex
	// asked are the addresses Dial was asked for, in order.
	asked []string
}

func (f *fakeVia) via(name string) *Via {
	return &Via{Name: name, Dial: func(ctx context.Context, addr string) (net.Conn, error) {
		f.mu.Lock()
		f.asked = append(f.asked, addr)
		f.mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, "tcp", f.srv.Listener.Addr().String())
	}}
}

func (f *fakeVia) dialled() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

// noLookup makes a Client fail the test when it resolves a name itself.
func noLookup(t *testing.T, c *Client) {
	c.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		t.Errorf("resolved %q on this host: a via endpoint's names are the far side's", host)
		return nil, errors.New("test: no lookups")
	}
}

func TestVia(t *testing.T) {
	var hosts []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts = append(hosts, r.Host)
		mu.Unlock()
		switch r.URL.Path {
		case "/api/away":
			http.Redirect(w, r, "http://elsewhere.internal:22/api/x", http.StatusFound)
		case "/api/port":
			http.Redirect(w, r, "http://prometheus.internal:22/api/x", http.StatusFound)
		default:
			w.Write([]byte("ok " + r.Header.Get("Authorization")))
		}
	}))
	defer srv.Close()
	fv := &fakeVia{srv: srv}
	c, _ := newTestClient(t)
	noLookup(t, c)
	e := &Endpoint{Name: "prom", BaseURL: "http://prometheus.internal:9090/api", Auth: bearer(),
		Via: fv.via("bastion"), FollowRedirects: RedirectsSameOrigin}

	for _, tc := range []struct {
		name    string
		req     Request
		status  int
		wantErr string
	}{
		{"plain", Request{Method: "GET", Path: "/v1/query"}, 200, ""},
		{"redirect to another host", Request{Method: "GET", Path: "/away"}, 302, ""},
		{"redirect to another port", Request{Method: "GET", Path: "/port"}, 302, ""},
		{"host in the path", Request{Method: "GET", Path: "//elsewhere.internal:22/x"}, 0, "path"},
		{"URL in the path", Request{Method: "GET", Path: "http://elsewhere.internal:22/x"}, 0, "path"},
		{"Host header", Request{Method: "GET", Path: "/x", Headers: map[string]string{"Host": "elsewhere.internal:22"}}, 0, "headers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := c.Do(ctx, e, tc.req, nil)
			if tc.wantErr != "" {
				var re *RequestError
				if !errors.As(err, &re) || re.Field != tc.wantErr {
					t.Fatalf("got %v, %v; want a *RequestError on %s", res, err, tc.wantErr)
				}
				return
			}
			if err != nil || res.HTTPStatus != tc.status {
				t.Fatalf("got %+v, %v; want HTTP %d", res, err, tc.status)
			}
		})
	}
	for _, a := range fv.dialled() {
		if a != "prometheus.internal:9090" {
			t.Errorf("the via was asked for %q; only the base URL's host and port may be", a)
		}
	}
	if len(fv.dialled()) == 0 {
		t.Error("nothing went through the via")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, h := range hosts {
		if h != "prometheus.internal:9090" {
			t.Errorf("the server was sent Host %q", h)
		}
	}
}

func TestViaValidate(t *testing.T) {
	v := &Via{Name: "bastion", Dial: func(context.Context, string) (net.Conn, error) { return nil, errors.New("unused") }}
	other := &Via{Name: "other", Dial: v.Dial}
	oauth := func(tokenURL string, via *Via) Auth {
		return Auth{Kind: AuthOAuth2ClientCredentials, OAuth2: &OAuth2{TokenURL: tokenURL, ClientID: "id", ClientSecret: []byte("s"), Via: via}}
	}
	for _, tc := range []struct {
		name  string
		e     Endpoint
		field string // "" for valid
	}{
		{"private without allow_private", Endpoint{BaseURL: "http://10.0.0.5:9090", Via: v}, ""},
		{"loopback", Endpoint{BaseURL: "https://127.0.0.1:8443", Via: v}, ""},
		{"a name", Endpoint{BaseURL: "https://es.internal", Via: v}, ""},
		{"link-local", Endpoint{BaseURL: "http://169.254.169.254", Via: v}, "via"},
		{"metadata v6", Endpoint{BaseURL: "http://[fd00:ec2::254]", Via: v}, "via"},
		{"link-local in another spelling", Endpoint{BaseURL: "http://0xa9fea9fe", Via: v}, "via"},
		{"mapped link-local", Endpoint{BaseURL: "http://[::ffff:169.254.169.254]", Via: v}, "via"},
		{"non-ASCII host", Endpoint{BaseURL: "http://bücher.internal", Via: v}, "via"},
		{"with a proxy", Endpoint{BaseURL: "https://es.internal", Via: v, Proxy: "http://127.0.0.1:3128"}, "via"},
		{"with the environment's proxy", Endpoint{BaseURL: "https://es.internal", Via: v, ProxyFromEnvironment: true}, "via"},
		{"no dial", Endpoint{BaseURL: "https://es.internal", Via: &Via{Name: "x"}}, "via"},
		{"token through it", Endpoint{BaseURL: "https://es.internal", Via: v, Auth: oauth("https://idp.internal/token", v)}, ""},
		{"token direct", Endpoint{BaseURL: "https://es.internal", Via: v, Auth: oauth("https://idp.example.com/token", nil)}, ""},
		{"token through another", Endpoint{BaseURL: "https://es.internal", Via: v, Auth: oauth("https://idp.internal/token", other)}, ""},
		{"token alone through it", Endpoint{BaseURL: "https://api.example.com", Auth: oauth("https://idp.internal/token", v)}, ""},
		{"plain token on the far loopback", Endpoint{BaseURL: "https://es.internal", Via: v, Auth: oauth("http://127.0.0.1:8080/token", v)}, ""},
		{"plain token on a far private address", Endpoint{BaseURL: "https://es.internal", Via: v, Auth: oauth("http://10.0.0.5/token", v)}, "token_url"},
		{"token link-local", Endpoint{BaseURL: "https://es.internal", Via: v, Auth: oauth("https://169.254.169.254/token", v)}, "token_via"},
		{"token on the base's host, another way", Endpoint{BaseURL: "https://es.internal", Via: v, Auth: oauth("https://es.internal/token", nil)}, "token_via"},
		{"token on the base's host, same way", Endpoint{BaseURL: "https://es.internal", Via: v, Auth: oauth("https://ES.internal:443/token", v)}, ""},
		{"negative max_conns", Endpoint{BaseURL: "https://es.internal", Via: v, MaxConns: -1}, "max_conns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.e
			e.Name = "x"
			if e.Auth.Kind == "" {
				e.Auth.Kind = AuthNone
			}
			err := e.Validate()
			var ee *EndpointError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.field != "" && (!errors.As(err, &ee) || ee.Field != tc.field):
				t.Fatalf("Validate: %v; want an *EndpointError on %s", err, tc.field)
			}
		})
	}
}

// TestViaToken fetches the token through the via or directly, as set,
// and the request through the via.
func TestViaToken(t *testing.T) {
	var issued atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			issued.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"access_token":"at-5d1e9c0b-FETCHED","token_type":"bearer","expires_in":3600}`))
			return
		}
		w.Write([]byte(r.Header.Get("Authorization")))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name     string
		tokenURL string
		sameVia  bool
		want     []string
	}{
		{"through the via", "http://127.0.0.1:8080/token", true, []string{"127.0.0.1:8080", "api.internal:80"}},
		{"directly", srv.URL + "/token", false, []string{"api.internal:80"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fv := &fakeVia{srv: srv}
			c, _ := newTestClient(t)
			v := fv.via("bastion")
			o := &OAuth2{TokenURL: tc.tokenURL, ClientID: "id", ClientSecret: []byte("cs-0a8e2f1d-SECRET"),
				OnToken: func([]byte, time.Time) error { return nil }}
			e := &Endpoint{Name: "api", BaseURL: "http://api.internal", Via: v, AllowPrivate: !tc.sameVia,
				Auth: Auth{Kind: AuthOAuth2ClientCredentials, OAuth2: o}}
			if tc.sameVia {
				o.Via = v
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var body strings.Builder
			res, err := c.Do(ctx, e, Request{Method: "GET", Path: "/"}, &body)
			if err != nil || res.Status != StatusOK || body.String() != "Bearer at-5d1e9c0b-FETCHED" {
				t.Fatalf("got %+v, %v, body %q", res, err, body.String())
			}
			if got := strings.Join(fv.dialled(), " "); got != strings.Join(tc.want, " ") {
				t.Errorf("the via was asked for %q; want %q", got, tc.want)
			}
		})
	}
}

// TestViaMaxConns: requests past MaxConns wait for a connection; they
// all share it.
func TestViaMaxConns(t *testing.T) {
	var inFlight, most atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-release
	}))
	defer srv.Close()
	fv := &fakeVia{srv: srv}
	c, _ := newTestClient(t)
	e := &Endpoint{Name: "api", BaseURL: "http://api.internal", Via: fv.via("bastion"), MaxConns: 2}
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if res, err := c.Do(ctx, e, Request{Method: "GET", Path: "/"}, nil); err != nil || res.Status != StatusOK {
				t.Errorf("got %+v, %v", res, err)
			}
		})
	}
	// Wait until two requests are in; then the others queue behind them.
	if !testenv.Eventually(30*time.Second, func() bool { return inFlight.Load() >= 2 }) {
		t.Error("two requests did not arrive")
	}
	close(release)
	wg.Wait()
	if got := most.Load(); got > 2 {
		t.Errorf("%d requests were in flight at once; MaxConns is 2", got)
	}
	if got := len(fv.dialled()); got > 2 {
		t.Errorf("%d connections were opened; MaxConns is 2", got)
	}
}
