package httpact

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// wantRequestError fails unless err is a *RequestError on field whose
// message contains every one of parts.
func wantRequestError(t *testing.T, err error, field string, parts ...string) {
	t.Helper()
	var re *RequestError
	if !errors.As(err, &re) || re.Field != field {
		t.Fatalf("error %v; want a *RequestError on %s", err, field)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q; want it to name %q", err, p)
		}
	}
}

// echoServer answers every request with what it carried: the credential,
// the method (honouring X-HTTP-Method-Override, as Express's
// method-override does) and the query. It compresses the answer whenever
// the request accepts gzip, as nginx with gzip on does, and serves
// /api/secret, a file holding the token, with Range support. seen records
// each request's headers.
type echoServer struct {
	*httptest.Server
	hits atomic.Int32
	mu   sync.Mutex
	seen []http.Header
}

func newEchoServer(t *testing.T) *echoServer {
	s := &echoServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/secret", func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "secret.txt", time.Time{}, strings.NewReader("token="+testToken+"\n"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		method := r.Method
		if o := r.Header.Get("X-HTTP-Method-Override"); o != "" {
			method = o
		}
		answer := method + " " + r.URL.Path + " auth=" + r.Header.Get("Authorization") + " q=" + r.URL.RawQuery
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			io.WriteString(zw, answer)
			zw.Close()
			return
		}
		io.WriteString(w, answer)
	})
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		s.seen = append(s.seen, r.Header.Clone())
		s.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *echoServer) lastSeen() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[len(s.seen)-1]
}

func gunzip(t *testing.T, b []byte) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("body %q is not gzip: %v", b, err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(plain)
}

// TestSpecialHeadersRefused sends each special header, in the spellings an
// agent might use, and checks that nothing reaches the server and that the
// error names the header, the reason and the config key.
func TestSpecialHeadersRefused(t *testing.T) {
	srv := newEchoServer(t)
	c, logs := newTestClient(t)
	// The reference list, written out again so that a header dropped from
	// the table in special.go fails here.
	tests := []struct{ header, canonical, why string }{
		{"Accept-Encoding", "Accept-Encoding", "compress"},
		{"accept-encoding", "Accept-Encoding", "compress"},
		{"Accept-Charset", "Accept-Charset", "re-encode"},
		{"A-IM", "A-IM", "delta"},
		{"Range", "Range", "part of the body"},
		{"RANGE", "Range", "part of the body"},
		{"Request-Range", "Request-Range", "part of the body"},
		{"If-Range", "If-Range", "part of the body"},
		{"X-HTTP-Method-Override", "X-HTTP-Method-Override", "another method"},
		{"x-http-method", "X-HTTP-Method", "another method"},
		{"X-Method-Override", "X-Method-Override", "another method"},
		{"X-Original-URL", "X-Original-URL", "another path"},
		{"X-Rewrite-Url", "X-Rewrite-URL", "another path"},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			e := testEndpoint(srv.Server, bearer())
			req := Request{Method: "POST", Path: "/items/1", Headers: map[string]string{tt.header: "DELETE"}}
			_, err := e.Check(req)
			wantRequestError(t, err, "headers", `"`+tt.canonical+`"`, tt.why, "allow_special_headers")
			_, errDo := c.Do(context.Background(), e, req, io.Discard)
			if errDo == nil || errDo.Error() != err.Error() {
				t.Errorf("Do = %v; want Check's error %v", errDo, err)
			}
		})
	}
	if n := srv.hits.Load(); n != 0 {
		t.Errorf("server got %d requests; want none", n)
	}
	checkNoSecret(t, logs, nil)
}

// TestSpecialHeadersAgainstServer shows what each refusal prevents on a
// server that honours the header, and that an endpoint can allow it.
func TestSpecialHeadersAgainstServer(t *testing.T) {
	srv := newEchoServer(t)
	c, logs := newTestClient(t)
	do := func(t *testing.T, e *Endpoint, req Request) (*Result, []byte, error) {
		t.Helper()
		var body bytes.Buffer
		res, err := c.Do(context.Background(), e, req, &body)
		checkNoSecret(t, logs, res)
		return res, body.Bytes(), err
	}

	t.Run("the transport's own gzip is decoded", func(t *testing.T) {
		res, body, err := do(t, testEndpoint(srv.Server, bearer()), Request{Method: "GET", Path: "/echo"})
		if err != nil || res.Status != StatusOK {
			t.Fatalf("%+v, %v; want ok", res, err)
		}
		if got := srv.lastSeen().Get("Accept-Encoding"); got != "gzip" {
			t.Errorf("server saw Accept-Encoding %q; want the transport's gzip", got)
		}
		// Plain text: the capture's redaction sees the token.
		if want := "GET /api/echo auth=Bearer " + testToken + " q="; string(body) != want {
			t.Errorf("body %q; want %q decoded", body, want)
		}
	})
	t.Run("Accept-Encoding refused", func(t *testing.T) {
		before := srv.hits.Load()
		_, _, err := do(t, testEndpoint(srv.Server, bearer()), Request{Method: "GET", Path: "/echo", Headers: map[string]string{"Accept-Encoding": "gzip"}})
		wantRequestError(t, err, "headers", "Accept-Encoding", "allow_special_headers")
		if srv.hits.Load() != before {
			t.Error("the request was sent")
		}
	})
	t.Run("Accept-Encoding allowed passes the body compressed", func(t *testing.T) {
		e := testEndpoint(srv.Server, bearer())
		e.AllowSpecialHeaders = []string{"accept-encoding"}
		res, body, err := do(t, e, Request{Method: "GET", Path: "/echo", Headers: map[string]string{"Accept-Encoding": "gzip"}})
		if err != nil || res.Status != StatusOK {
			t.Fatalf("%+v, %v; want ok", res, err)
		}
		// What the refusal prevents: the token is in the body, but only
		// once decompressed.
		if bytes.Contains(body, []byte(testToken)) || !strings.Contains(gunzip(t, body), testToken) {
			t.Errorf("body %q; want the token inside gzip", body)
		}
	})
	t.Run("Range refused", func(t *testing.T) {
		for _, h := range []string{"Range", "Request-Range", "If-Range"} {
			_, _, err := do(t, testEndpoint(srv.Server, bearer()), Request{Method: "GET", Path: "/secret", Headers: map[string]string{h: "bytes=0-9"}})
			wantRequestError(t, err, "headers", h, "part of the body")
		}
	})
	t.Run("Range allowed returns a piece", func(t *testing.T) {
		e := testEndpoint(srv.Server, bearer())
		e.AllowSpecialHeaders = []string{"Range"}
		res, body, err := do(t, e, Request{Method: "GET", Path: "/secret", Headers: map[string]string{"Range": "bytes=6-11"}})
		if err != nil || res.HTTPStatus != http.StatusPartialContent || string(body) != testToken[:6] {
			t.Errorf("%+v, %v, body %q; want 206 with %q", res, err, body, testToken[:6])
		}
	})
	t.Run("method override refused", func(t *testing.T) {
		e := testEndpoint(srv.Server, bearer())
		e.Allow = allowOnly("GET POST", "/items")
		before := srv.hits.Load()
		_, _, err := do(t, e, Request{Method: "POST", Path: "/items/1", Headers: map[string]string{"X-HTTP-Method-Override": "DELETE"}})
		wantRequestError(t, err, "headers", "X-HTTP-Method-Override", "methods policy")
		if srv.hits.Load() != before {
			t.Error("the request was sent")
		}
		// What the refusal prevents: allowed, the server runs DELETE.
		e.AllowSpecialHeaders = []string{"X-HTTP-Method-Override"}
		_, body, err := do(t, e, Request{Method: "POST", Path: "/items/1", Headers: map[string]string{"X-HTTP-Method-Override": "DELETE"}})
		if err != nil || !strings.HasPrefix(string(body), "DELETE /api/items/1 ") {
			t.Errorf("allowed: body %q, %v; want the server to run DELETE", body, err)
		}
	})
	t.Run("allowed still obeys the allowlist", func(t *testing.T) {
		e := testEndpoint(srv.Server, bearer())
		e.AllowSpecialHeaders = []string{"Range"}
		e.HeaderAllow = []string{"Accept"}
		_, _, err := do(t, e, Request{Method: "GET", Path: "/secret", Headers: map[string]string{"Range": "bytes=0-1"}})
		wantRequestError(t, err, "headers", "allowlist")
	})
}

// TestCheck checks that Check decides on the normalized request as Do
// does, refusing what only normalization shows (the issue's
// /echo/../redirect under paths = ["/echo/**"]), and that what it accepts
// is what the server gets.
func TestCheck(t *testing.T) {
	var gotURI atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotURI.Store(r.RequestURI)
	}))
	defer srv.Close()
	c, _ := newTestClient(t)
	tests := []struct {
		name      string
		req       Request
		want      Checked
		wantErr   string // "" means accepted
		wantField string // the *RequestError field, if any
	}{
		{"plain", Request{Method: "get", Path: "/echo/a"}, Checked{"GET", "/echo/a", "/api/echo/a"}, "", ""},
		{"dot segments resolved", Request{Method: "GET", Path: "/echo/./b/../a/"}, Checked{"GET", "/echo/a", "/api/echo/a/"}, "", ""},
		{"only normalization leaves the pattern", Request{Method: "GET", Path: "/echo/../redirect"}, Checked{"GET", "/redirect", "/api/redirect"}, errDenied.Error(), ""},
		{"encoded slash decoded for the policy", Request{Method: "GET", Path: "/echo%2Fa"}, Checked{"GET", "/echo/a", "/api/echo%2Fa"}, "", ""},
		{"method denied", Request{Method: "DELETE", Path: "/echo/a"}, Checked{"DELETE", "/echo/a", "/api/echo/a"}, errDenied.Error(), ""},
		{"escape refused before the policy", Request{Method: "GET", Path: "/echo/../../x"}, Checked{}, "path: escapes the base path", "path"},
		{"special header after the policy", Request{Method: "GET", Path: "/echo/a", Headers: map[string]string{"Range": "bytes=0-1"}},
			Checked{"GET", "/echo/a", "/api/echo/a"}, "", "headers"},
		{"one header twice in two cases", Request{Method: "GET", Path: "/echo/a", Headers: map[string]string{"X-Env": "prod", "x-env": "test"}},
			Checked{"GET", "/echo/a", "/api/echo/a"}, "", "headers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := testEndpoint(srv, bearer())
			var asked string
			e.Allow = func(method, path string) error {
				asked = method + " " + path
				return allowOnly("GET", "/echo")(method, path)
			}
			got, err := e.Check(tt.req)
			if got != tt.want {
				t.Errorf("Check = %+v; want %+v", got, tt.want)
			}
			switch {
			case tt.wantField != "":
				wantRequestError(t, err, tt.wantField)
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Check error %v; want none", err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Fatalf("Check error %v; want %q", err, tt.wantErr)
			}
			if tt.want.Path != "" && asked != tt.want.Method+" "+tt.want.Path {
				t.Errorf("Allow asked about %q; want %q", asked, tt.want.Method+" "+tt.want.Path)
			}

			gotURI.Store("")
			res, errDo := c.Do(context.Background(), e, tt.req, io.Discard)
			if (err == nil) != (errDo == nil) || (err != nil && err.Error() != errDo.Error()) {
				t.Fatalf("Do = %v; want Check's decision %v", errDo, err)
			}
			if err == nil && (res.Status != StatusOK || gotURI.Load() != tt.want.EscapedPath) {
				t.Errorf("server got %q (%s); want %q", gotURI.Load(), res.Status, tt.want.EscapedPath)
			}
		})
	}
}

// TestSizeLimits checks MaxURLBytes and MaxHeaderBytes at their edges,
// against a server that sees what was sent.
func TestSizeLimits(t *testing.T) {
	var gotURI, gotHeader atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotURI.Store(r.RequestURI)
		gotHeader.Store(r.Header.Get("X-Pad"))
	}))
	defer srv.Close()
	c, logs := newTestClient(t)
	// The query credential is long and not counted.
	auth := Auth{Kind: AuthQuery, Param: "api_key", Token: []byte(strings.Repeat(testToken, 10))}
	const urlLimit, headerLimit = 64, 48
	base := len("/api/p/")
	pathOf := func(n int) string { return "/p/" + strings.Repeat("a", n-base) }
	tests := []struct {
		name    string
		req     Request
		field   string // "" means accepted
		wantMsg []string
	}{
		{"path at the URL limit", Request{Path: pathOf(urlLimit)}, "", nil},
		{"path over the URL limit", Request{Path: pathOf(urlLimit + 1)}, "url", []string{"65 bytes", "limit of 64", "max_url_bytes"}},
		// "/api/p/" (7) + "?q=" (3) + 54 = 64
		{"path and query at the limit", Request{Path: "/p/", Query: url.Values{"q": {strings.Repeat("b", 54)}}}, "", nil},
		{"query counted escaped", Request{Path: "/p/", Query: url.Values{"q": {strings.Repeat("/", 19)}}}, "url", []string{"67 bytes"}},
		{"escaping counted", Request{Path: "/p/" + strings.Repeat("é", 10)}, "url", []string{"67 bytes"}},
		{"headers at the limit", Request{Headers: map[string]string{"X-Pad": strings.Repeat("h", headerLimit-5)}}, "", nil},
		{"headers over the limit", Request{Headers: map[string]string{"X-Pad": strings.Repeat("h", 30), "X-B": strings.Repeat("h", 11)}},
			"headers", []string{"49 bytes", "limit of 48", "max_header_bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := testEndpoint(srv, auth)
			e.MaxURLBytes, e.MaxHeaderBytes = urlLimit, headerLimit
			tt.req.Method = "GET"
			gotURI.Store("")
			res, err := c.Do(context.Background(), e, tt.req, io.Discard)
			if tt.field != "" {
				wantRequestError(t, err, tt.field, tt.wantMsg...)
				if gotURI.Load() != "" {
					t.Error("the request was sent")
				}
				return
			}
			if err != nil || res.Status != StatusOK {
				t.Fatalf("%+v, %v; want ok", res, err)
			}
			u, _ := url.Parse(gotURI.Load().(string))
			u.RawQuery = strings.TrimPrefix(strings.TrimPrefix(u.RawQuery, "api_key="+string(auth.Token)), "&")
			if n := len(u.String()); n > urlLimit {
				t.Errorf("server got %d bytes of the agent's path and query; want at most %d", n, urlLimit)
			}
			if v := gotHeader.Load().(string); v != tt.req.Headers["X-Pad"] {
				t.Errorf("server got X-Pad %q; want %q", v, tt.req.Headers["X-Pad"])
			}
			checkNoSecret(t, logs, res)
		})
	}
}

func TestSpecialHeadersValidate(t *testing.T) {
	tests := []struct {
		names []string
		want  string // "" means valid
	}{
		{[]string{"Accept-Encoding", "range", "X-HTTP-Method-Override"}, ""},
		{[]string{"TE"}, "always refused"},
		{[]string{"Authorization"}, "always refused"},
		{[]string{"X-Custom"}, "not a special header"},
		{[]string{"Range*"}, "not a special header"},
	}
	for _, tt := range tests {
		e := Endpoint{Name: "x", BaseURL: "https://api.example/", AllowSpecialHeaders: tt.names}
		err := e.Validate()
		var ee *EndpointError
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%v: %v; want valid", tt.names, err)
		case tt.want != "" && (!errors.As(err, &ee) || ee.Field != "allow_special_headers" || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%v: %v; want an allow_special_headers error saying %q", tt.names, err, tt.want)
		}
	}
	for _, f := range []struct {
		field string
		edit  func(*Endpoint)
	}{
		{"max_url_bytes", func(e *Endpoint) { e.MaxURLBytes = -1 }},
		{"max_header_bytes", func(e *Endpoint) { e.MaxHeaderBytes = -1 }},
	} {
		e := Endpoint{Name: "x", BaseURL: "https://api.example/"}
		f.edit(&e)
		var ee *EndpointError
		if err := e.Validate(); !errors.As(err, &ee) || ee.Field != f.field {
			t.Errorf("negative %s: %v; want an *EndpointError", f.field, err)
		}
	}
}

// FuzzCheck sends Check random methods, paths, queries and headers. It
// must never panic, must refuse only with a *RequestError that echoes no
// value, and whatever it accepts must stay under the base path, carry no
// forbidden or special header and keep within the size limits, as a
// reference written here independently decides.
func FuzzCheck(f *testing.F) {
	f.Add("GET", "/repos/o/r", "page", "2", "Accept", "application/json")
	f.Add("get", "/a/../../x", "q", "v", "Range", "bytes=0-1")
	f.Add("POST", "/x", "api_key", "x", "X-HTTP-Method-Override", "DELETE")
	f.Add("GET", "/%2e%2e/x", "q", "a b", "accept-encoding", "gzip")
	f.Add("GET", "/"+strings.Repeat("a", 60), "", "", "X-Api-Key", "x")
	f.Add("CONNECT", "//evil/x", "q\r\n", "v", "Host", "evil")
	f.Add("GET", "/x", "q", strings.Repeat("/", 30), "X-Pad", strings.Repeat("p", 40))
	refused := []string{ // forbidden and special, spelt out again
		"Authorization", "Cookie", "Cookie2", "Host", "Connection", "Content-Length", "Transfer-Encoding",
		"TE", "Trailer", "Upgrade", "Keep-Alive", "Expect",
		"Accept-Encoding", "Accept-Charset", "A-IM", "Range", "Request-Range", "If-Range",
		"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override", "X-Original-URL", "X-Rewrite-URL",
	}
	const urlLimit, headerLimit = 64, 40
	const marker = "\u00a7" // in every value; in no message, nor in a valid header name
	f.Fuzz(func(t *testing.T, method, rel, qname, qvalue, hname, hvalue string) {
		qvalue, hvalue = qvalue+marker, hvalue+marker
		for _, auth := range []Auth{
			{Kind: AuthHeader, Header: "X-Api-Key"},
			{Kind: AuthQuery, Param: "api_key"},
		} {
			var asked string
			e := &Endpoint{Name: "fuzz", BaseURL: "https://api.example/v1", Auth: auth,
				MaxURLBytes: urlLimit, MaxHeaderBytes: headerLimit,
				Allow: func(m, p string) error { asked = m + " " + p; return nil }}
			var query url.Values
			if qname != "" {
				query = url.Values{qname: {qvalue}}
			}
			got, err := e.Check(Request{Method: method, Path: rel, Query: query, Headers: map[string]string{hname: hvalue}})

			mustRefuse := strings.EqualFold(method, "CONNECT") || strings.HasPrefix(strings.ToLower(hname), "proxy-") ||
				len(hname)+len(hvalue) > headerLimit ||
				(auth.Kind == AuthQuery && strings.EqualFold(qname, "api_key")) ||
				(auth.Kind == AuthHeader && strings.EqualFold(hname, "X-Api-Key"))
			for _, n := range refused {
				mustRefuse = mustRefuse || strings.EqualFold(hname, n)
			}
			if err != nil {
				var re *RequestError
				if !errors.As(err, &re) {
					t.Fatalf("Check: %v; want a *RequestError", err)
				}
				if strings.Contains(err.Error(), marker) && !strings.Contains(qname, marker) {
					t.Fatalf("error %q echoes a value", err)
				}
				continue
			}
			if mustRefuse {
				t.Fatalf("Check accepted %q %q header %q (%d bytes); want it refused", method, rel, hname, len(hname)+len(hvalue))
			}
			if asked != got.Method+" "+got.Path {
				t.Fatalf("Allow asked about %q; Check returned %s %s", asked, got.Method, got.Path)
			}
			if got.Method != strings.ToUpper(method) || !strings.HasPrefix(got.Path, "/") {
				t.Fatalf("Check returned method %q, path %q", got.Method, got.Path)
			}
			if got.EscapedPath != "/v1" && !strings.HasPrefix(got.EscapedPath, "/v1/") {
				t.Fatalf("path %q: escaped %q leaves /v1", rel, got.EscapedPath)
			}
			dec, err := url.PathUnescape(got.EscapedPath)
			if err != nil || strings.TrimSuffix(dec, "/") != strings.TrimSuffix("/v1"+got.Path, "/") {
				t.Fatalf("escaped path %q decodes to %q (%v); want /v1 and the checked path %q", got.EscapedPath, dec, err, got.Path)
			}
			if c := path.Clean(dec); c != "/v1" && !strings.HasPrefix(c, "/v1/") {
				t.Fatalf("path %q: decoded %q cleans to %q, outside /v1", rel, dec, c)
			}
			n := len(got.EscapedPath)
			if q := query.Encode(); q != "" {
				n += 1 + len(q)
			}
			if n > urlLimit {
				t.Fatalf("accepted %d bytes of path and query; want at most %d", n, urlLimit)
			}
			// The query value is sent only with a name.
			if hasControl(hvalue) || hasControl(qname) || (qname != "" && hasControl(qvalue)) {
				t.Fatalf("accepted a control character in a header or query")
			}
		}
	})
}
