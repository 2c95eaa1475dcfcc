package httpact

import (
	"bytes"
	"context"
	"encoding/binary"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf16"
)

// newCharsetServer echoes the Authorization header as JSON in the charset
// the Accept header's media type names, as Spring's Jackson converter does
// (getJsonEncoding takes the charset of the media type the caller asked
// for: UTF-8, UTF-16 or UTF-32), and JAX-RS and others do for text.
func newCharsetServer(t *testing.T, hits *atomic.Int32) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		answer := `{"auth":"` + r.Header.Get("Authorization") + `"}`
		_, params, _ := mime.ParseMediaType(r.Header.Get("Accept"))
		if cs := strings.ToUpper(params["charset"]); strings.HasPrefix(cs, "UTF-16") {
			w.Header().Set("Content-Type", "application/json;charset="+cs)
			var b bytes.Buffer
			for _, u := range utf16.Encode([]rune(answer)) {
				binary.Write(&b, binary.BigEndian, u)
			}
			w.Write(b.Bytes())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(answer))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestAcceptCharsetParameter: Accept-Charset is refused as a special
// header, but the same ask fits in Accept's media type parameter
// ("application/json;charset=UTF-16"), which Spring and JAX-RS servers
// honour: the echoed credential then comes back in UTF-16, a form
// redaction does not match. An Accept that names a charset other than
// UTF-8 (or US-ASCII, the same bytes) is refused like Accept-Charset, and
// allowed where Accept-Charset is.
func TestAcceptCharsetParameter(t *testing.T) {
	var hits atomic.Int32
	srv := newCharsetServer(t, &hits)
	c, logs := newTestClient(t)
	tests := []struct {
		accept  string
		allowed bool
	}{
		{"application/json;charset=UTF-16", false},
		{"application/json; charset=\"utf-16le\"", false},
		{"text/html, application/json;q=0.9;CHARSET=utf-32", false},
		{"application/json;charset=utf-7", false},
		{"application/json", true},
		{"application/json; charset=utf-8", true},
		{"application/json;charset=\"UTF-8\", text/plain;charset=us-ascii;q=0.5", true},
		{"*/*", true},
	}
	for _, tt := range tests {
		t.Run(tt.accept, func(t *testing.T) {
			before := hits.Load()
			req := Request{Method: "GET", Path: "/echo", Headers: map[string]string{"Accept": tt.accept}}
			var body bytes.Buffer
			res, err := c.Do(context.Background(), testEndpoint(srv, bearer()), req, &body)
			checkNoSecret(t, logs, res)
			if tt.allowed {
				if err != nil || !strings.Contains(body.String(), testToken) {
					t.Errorf("%v, body %q; want it sent, the token in plain text", err, body.String())
				}
				return
			}
			wantRequestError(t, err, "headers", `"Accept"`, "charset", "Accept-Charset", "allow_special_headers")
			if strings.Contains(err.Error(), tt.accept) {
				t.Errorf("error %q quotes the header's value", err)
			}
			if hits.Load() != before {
				t.Errorf("the request was sent")
			}
		})
	}
	t.Run("allowed with Accept-Charset", func(t *testing.T) {
		e := testEndpoint(srv, bearer())
		e.AllowSpecialHeaders = []string{"Accept-Charset"}
		var body bytes.Buffer
		res, err := c.Do(context.Background(), e, Request{Method: "GET", Path: "/echo", Headers: map[string]string{"Accept": "application/json;charset=UTF-16"}}, &body)
		checkNoSecret(t, logs, res)
		// What the refusal prevents: the token is in the body, but not as
		// itself.
		if err != nil || bytes.Contains(body.Bytes(), []byte(testToken)) || !bytes.Contains(body.Bytes(), []byte{0, testToken[0], 0, testToken[1]}) {
			t.Errorf("%v, body %q; want the token in UTF-16", err, body.String())
		}
	})
}
