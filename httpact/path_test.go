package httpact

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"
)

func TestConfinePath(t *testing.T) {
	tests := []struct {
		name, base, rel string
		want, clean     string
	}{
		{"empty", "/api/v1", "", "/api/v1", "/"},
		{"slash", "/api/v1", "/", "/api/v1/", "/"},
		{"root base empty", "", "", "/", "/"},
		{"relative", "/api", "repos/x", "/api/repos/x", "/repos/x"},
		{"dots resolved", "/api", "/a/./b/../c", "/api/a/c", "/a/c"},
		{"dotdot to base", "/api", "/a/..", "/api/", "/"},
		{"empty segments collapse", "/api", "/a//b", "/api/a/b", "/a/b"},
		{"trailing slash kept", "", "/repos/", "/repos/", "/repos"},
		{"encoding kept", "", "/files/a%20b", "/files/a%20b", "/files/a b"},
		{"space escaped", "", "/a b", "/a%20b", "/a b"},
		{"utf8 escaped", "", "/ü", "/%C3%BC", "/ü"},
		{"encoded slash kept", "", "/projects/group%2Fproject", "/projects/group%2Fproject", "/projects/group/project"},
		{"parameters kept", "", "/a;b=c,d", "/a;b=c,d", "/a;b=c,d"},
		{"colon after slash", "", "/a:b", "/a:b", "/a:b"},
		{"literal percent", "", "/100%25", "/100%25", "/100%"},
		{"quote escaped", "", `/a"<>`, "/a%22%3C%3E", `/a"<>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, clean, err := confinePath(tt.base, tt.rel)
			if err != nil {
				t.Fatalf("confinePath(%q, %q): %v", tt.base, tt.rel, err)
			}
			if got != tt.want || clean != tt.clean {
				t.Errorf("confinePath(%q, %q) = %q, %q; want %q, %q", tt.base, tt.rel, got, clean, tt.want, tt.clean)
			}
		})
	}
}

func TestConfinePathRefused(t *testing.T) {
	tests := []struct{ name, rel, reason string }{
		{"dotdot escapes", "../x", "escapes the base"},
		{"dotdot escapes deeper", "/a/../../x", "escapes the base"},
		{"network path", "//evil.example/x", "host"},
		{"absolute URL", "http://evil.example/", "absolute URL"},
		{"absolute URL upper", "HTTPS://evil.example/", "absolute URL"},
		{"scheme only", "javascript:alert(1)", "absolute URL"},
		{"encoded dotdot", "/%2e%2e/x", "encoded dot"},
		{"encoded dotdot upper", "/%2E%2E", "encoded dot"},
		{"mixed encoded dotdot", "/.%2e/x", "encoded dot"},
		{"encoded single dot", "/%2e/x", "encoded dot"},
		{"dotdot with encoded slash", "/a/..%2f..%2fadmin", "encoded dot"},
		{"double-encoded dotdot", "/%252e%252e/x", "encoded dot"},
		{"double-encoded slash dotdot", "/a%252f..%252f..", "encoded dot"},
		{"tomcat parameter", "/..;/admin", "dot segment with parameters"},
		{"encoded parameter dotdot", "/%2e%2e;x/admin", "encoded dot"},
		{"encoded leading slash", "/%2Fevil.example", "empty segment"},
		{"encoded double slash", "/a%2F%2Fb", "empty segment"},
		{"control", "/a\x00b", "control"},
		{"CRLF", "/a\r\nHost: evil", "control"},
		{"tab", "/a\tb", "control"},
		{"DEL", "/a\x7f", "control"},
		{"encoded CRLF", "/a%0d%0aX-Injected:%201", "encoded control"},
		{"encoded NUL", "/a%00", "encoded control"},
		{"double-encoded CR", "/a%250d", "encoded control"},
		{"backslash", `/a\..\..\x`, "backslash"},
		{"encoded backslash", "/a%5c..%5cx", "encoded backslash"},
		{"query", "/x?y=1", "'?'"},
		{"fragment", "/x#f", "'#'"},
		{"lone percent", "/%", "percent-encoding"},
		{"bad hex", "/%zz", "percent-encoding"},
		{"short escape", "/a%2", "percent-encoding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := confinePath("/api", tt.rel)
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("confinePath(%q) = %q, %v; want a *RequestError", tt.rel, got, err)
			}
			if re.Field != "path" || !strings.Contains(re.Reason, tt.reason) {
				t.Errorf("error = %q; want field path and a reason containing %q", err, tt.reason)
			}
		})
	}
}

// FuzzPathConfinement checks the property the agent must never break: the
// URL sent has the base's scheme, host, port and no userinfo, and its path,
// however many times a server decodes it, stays under the base path.
func FuzzPathConfinement(f *testing.F) {
	for _, s := range []string{
		"", "/", "/repos/x", "../x", "/a/../../b", "//evil/x", "http://evil/",
		"/%2e%2e/x", "/..%2f..%2fx", "/%252e%252e/", "/..;/x", "/a%2F%2Fb",
		"/a\r\nb", "/a%0d%0a", `/a\..\b`, "/ü/x y", "/@evil", "/a:b@c",
		"/%2540evil", "/a?x", "/;/..", "/.%2e/", "/a%2f%2e%2e",
	} {
		f.Add(s)
	}
	bases := []string{"http://h.example:8080", "https://api.example/v1", "http://127.0.0.1:1/a/b%20c/"}
	f.Fuzz(func(t *testing.T, rel string) {
		for _, b := range bases {
			e := &Endpoint{Name: "fuzz", BaseURL: b}
			base, err := parseBaseURL(b)
			if err != nil {
				t.Fatal(err)
			}
			out, err := e.prepare(&Request{Method: "GET", Path: rel})
			if err != nil {
				var re *RequestError
				if !errors.As(err, &re) {
					t.Fatalf("prepare(%q): %v; want a *RequestError", rel, err)
				}
				continue
			}
			// What goes on the wire is the request target; parse it the
			// way a server would, relative to the base origin.
			target := out.url.RequestURI()
			wire, err := url.Parse(base.Scheme + "://" + base.Host + target)
			if err != nil {
				t.Fatalf("request target %q does not parse: %v", target, err)
			}
			for _, u := range []*url.URL{out.url, wire} {
				if u.Scheme != base.Scheme || u.Host != base.Host || u.User != nil {
					t.Fatalf("path %q: URL %q leaves the base origin %q", rel, u.Redacted(), b)
				}
			}
			if !strings.HasPrefix(target, "/") || strings.HasPrefix(target, "//") {
				t.Fatalf("path %q: request target %q is not an absolute path", rel, target)
			}
			level, baseLevel := wire.EscapedPath(), strings.TrimSuffix(base.EscapedPath(), "/")
			for n := 0; n <= maxDecodeLevels; n++ {
				if hasControl(level) || strings.Contains(level, "\\") {
					t.Fatalf("path %q: decoding level %d of %q has a backslash or control character", rel, n, wire.EscapedPath())
				}
				if c := path.Clean(level); c != baseLevel && !strings.HasPrefix(c, baseLevel+"/") && !(baseLevel == "" && c == "/") {
					t.Fatalf("path %q: decoding level %d of %q cleans to %q, outside %q", rel, n, wire.EscapedPath(), c, baseLevel)
				}
				dec, err := url.PathUnescape(level)
				decBase, errBase := url.PathUnescape(baseLevel)
				if err != nil || errBase != nil || dec == level {
					break
				}
				level, baseLevel = dec, decBase
			}
		}
	})
}

// FuzzRequestHeaders checks that no agent header or query can add, replace
// or split off a credential or header line: an accepted request, as written
// on the wire, has exactly the injected credential and one header per line.
func FuzzRequestHeaders(f *testing.F) {
	f.Add("X-Ok", "v", "q", "1")
	f.Add("Authorization", "Bearer x", "api_key", "x")
	f.Add("X-Ok", "a\r\nAuthorization: x", "q", "a\r\nb")
	f.Add("X-Api-Key", "x", "API_KEY", "x")
	f.Add("Proxy-Authorization", "x", "q&api_key=x", "1")
	f.Fuzz(func(t *testing.T, name, value, qname, qvalue string) {
		for _, auth := range []Auth{
			{Kind: AuthBearer, Token: []byte(testToken)},
			{Kind: AuthHeader, Header: "X-Api-Key", Token: []byte(testToken)},
			{Kind: AuthQuery, Param: "api_key", Token: []byte(testToken)},
		} {
			e := &Endpoint{Name: "fuzz", BaseURL: "https://api.example/v1", Auth: auth}
			out, err := e.prepare(&Request{Method: "GET", Path: "/x",
				Headers: map[string]string{name: value}, Query: url.Values{qname: {qvalue}}})
			if err != nil {
				var re *RequestError
				if !errors.As(err, &re) {
					t.Fatalf("prepare: %v; want a *RequestError", err)
				}
				if strings.Contains(err.Error(), testToken) {
					t.Fatalf("error %q contains the token", err)
				}
				continue
			}
			req, _ := http.NewRequest(out.method, out.url.String(), nil)
			req.URL, req.Header = out.url, out.header
			var wire bytes.Buffer
			if err := req.Write(&wire); err != nil {
				continue // net/http refused it: nothing was sent
			}
			head, _, _ := strings.Cut(wire.String(), "\r\n\r\n")
			lines := strings.Split(head, "\r\n")
			creds := 0
			for _, l := range lines[1:] {
				if !strings.Contains(l, ": ") && !strings.HasSuffix(l, ":") {
					t.Fatalf("header line %q is not a header: the request was split", l)
				}
				k, v, _ := strings.Cut(l, ":")
				switch {
				case strings.EqualFold(k, "Authorization"), auth.Kind == AuthHeader && strings.EqualFold(k, auth.Header):
					creds++
					if want := testToken; !strings.HasSuffix(v, want) {
						t.Fatalf("credential header %q does not carry the injected token", l)
					}
				case strings.EqualFold(k, "Host") && strings.TrimSpace(v) != "api.example":
					t.Fatalf("Host is %q", v)
				}
			}
			if q := out.url.Query()["api_key"]; auth.Kind == AuthQuery && (len(q) != 1 || q[0] != testToken) {
				t.Fatalf("query credential %q; want exactly the injected token", q)
			}
			if want := map[string]int{AuthBearer: 1, AuthHeader: 1, AuthQuery: 0}[auth.Kind]; creds != want {
				t.Fatalf("%d credential headers on the wire; want %d:\n%s", creds, want, head)
			}
			if strings.Count(lines[0], " ") != 2 || !strings.HasPrefix(lines[0], "GET /v1/x") {
				t.Fatalf("request line %q was altered", lines[0])
			}
		}
	})
}
