package httpact_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/actiongw/actiongw/httpact"
)

func ExampleClient_Do() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, r.URL.Path+" as "+r.Header.Get("Authorization")[:6])
	}))
	defer srv.Close()

	c := httpact.NewClient(nil)
	defer c.Close()
	e := &httpact.Endpoint{
		Name:    "api",
		BaseURL: srv.URL + "/v1",
		// The gateway passes its policy; this one allows GET under /repos.
		Allow: func(method, path string) error {
			if method != "GET" || !strings.HasPrefix(path, "/repos/") {
				return fmt.Errorf("%s %s is not allowed", method, path)
			}
			return nil
		},
		Auth:            httpact.Auth{Kind: httpact.AuthBearer, Token: []byte("from-the-keyring")},
		AllowPrivate:    true, // the test server is on loopback
		ResponseHeaders: []string{"Content-Type"},
	}
	var body bytes.Buffer
	res, err := c.Do(context.Background(), e, httpact.Request{
		Method: "GET", Path: "/repos/o/r", Query: url.Values{"page": {"2"}},
	}, &body)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, res.HTTPStatus, res.Attempts, res.Headers["content-type"])
	fmt.Println(body.String())

	_, err = c.Do(context.Background(), e, httpact.Request{Method: "GET", Path: "/repos/../admin"}, &body)
	fmt.Println(err)
	// Output:
	// ok 200 1 text/plain
	// /v1/repos/o/r as Bearer
	// GET /admin is not allowed
}

func ExampleEndpoint_Check() {
	e := &httpact.Endpoint{
		Name:    "api",
		BaseURL: "https://api.example.com/v1",
		Allow: func(method, path string) error {
			if !strings.HasPrefix(path, "/echo/") {
				return fmt.Errorf("%s %s is not allowed", method, path)
			}
			return nil
		},
		MaxURLBytes: 8192,
	}
	// The gateway decides, and records, before anything is sent.
	for _, r := range []httpact.Request{
		{Method: "get", Path: "/echo/./a%20b"},
		{Method: "GET", Path: "/echo/../redirect"},
		{Method: "GET", Path: "/echo/x", Headers: map[string]string{"Range": "bytes=0-9"}},
	} {
		c, err := e.Check(r)
		fmt.Printf("%s %q %q: %v\n", c.Method, c.Path, c.EscapedPath, err)
	}
	// Output:
	// GET "/echo/a b" "/v1/echo/a%20b": <nil>
	// GET "/redirect" "/v1/redirect": GET /redirect is not allowed
	// GET "/echo/x" "/v1/echo/x": headers: "Range" is refused: it asks for part of the body, so a credential split across parts passes redaction one piece at a time; the endpoint's allow_special_headers can permit it
}
