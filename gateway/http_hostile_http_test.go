package gateway

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/secrets"
)

// hostileGateway is a gateway with one endpoint "api" configured by the
// given lines, whose token secret is apiToken.
func hostileGateway(t *testing.T, endpoint string) *fixture {
	t.Helper()
	toml := fmt.Sprintf("[server]\nstate_dir = %q\n[http.api]\nmethods = [\"GET\", \"POST\"]\nallow_private = true\n%s\n", t.TempDir(), endpoint)
	cfg, err := config.Parse([]byte(toml))
	if err != nil {
		t.Fatal(err)
	}
	store := secrets.Memory{"api-token": []byte(apiToken)}
	gw := New(context.Background(), Options{Config: cfg, Secrets: store})
	if _, err := gw.Config(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return &fixture{gw: gw, cfg: cfg, store: store, toml: toml}
}

// TestHostileHugeResponseHeaders: a server answers with selected headers
// (X-Request-Id is returned by default) far larger than result_bytes, or
// very many of them, or a malformed header line net/http quotes in its
// error. The agent must still get its result with the handle to the body,
// and a clipped value must not end in the start of the credential.
func TestHostileHugeResponseHeaders(t *testing.T) {
	for _, tc := range []struct {
		name, extra string
		answer      func(w http.ResponseWriter, auth string)
		status      Status
	}{
		{"one huge value", "", func(w http.ResponseWriter, auth string) {
			w.Header().Set("X-Request-Id", strings.Repeat("a", 200<<10)+auth)
		}, StatusOK},
		{"credential across the clip", "", func(w http.ResponseWriter, auth string) {
			w.Header().Set("X-Request-Id", strings.Repeat("a", maxHeaderBytes-len("Bearer tok"))+auth)
		}, StatusOK},
		{"huge name", `response_headers = ["X-*"]`, func(w http.ResponseWriter, auth string) {
			w.Header().Set("X-"+strings.Repeat("n", 200<<10), auth)
		}, StatusOK},
		{"many headers", `response_headers = ["X-*"]`, func(w http.ResponseWriter, auth string) {
			for i := range 5000 {
				w.Header().Set(fmt.Sprintf("X-H%d", i), strings.Repeat("v", 90)+auth)
			}
		}, StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tc.answer(w, r.Header.Get("Authorization"))
				fmt.Fprintln(w, "hello")
			}))
			t.Cleanup(api.Close)
			f := hostileGateway(t, fmt.Sprintf("base_url = %q\nauth = \"bearer\"\ntoken_secret = \"api-token\"\n%s", api.URL, tc.extra))
			r := f.gw.HTTPRequest(context.Background(), HTTPRequestInput{Endpoint: "api", Method: "GET", Path: "/"}, nil)
			out, ok := r.Structured.(*HTTPRequestOutput)
			if !ok || out.Status != tc.status || out.Handle == "" {
				t.Fatalf("got %q; want status %s with a handle", output.Clip(r.Text, 300), tc.status)
			}
			if got, want := out.Body.Head, "hello\n"; got != want {
				t.Errorf("body %q; want %q", got, want)
			}
			if tc.name == "many headers" && (len(out.Headers) == 0 || !strings.Contains(r.Text, "response headers left out")) {
				t.Errorf("%d headers kept, text %q; want some, and the text to say others were left out", len(out.Headers), output.Clip(r.Text, 300))
			}
			checkNoPieceOf(t, apiToken, structured(t, r)+r.Text+readAudit(t, f))
		})
	}
}

// checkNoPieceOf fails if all holds the secret or its first 4 bytes or more
// at the end of a clipped value ("...").
func checkNoPieceOf(t *testing.T, secret, all string) {
	t.Helper()
	for n := len(secret); n >= 4; n-- {
		piece := secret[:n]
		if n < len(secret) {
			piece += "..."
		}
		if strings.Contains(all, piece) {
			t.Fatalf("%d bytes of the credential leaked", n)
		}
	}
}

// rawServer answers every connection with answer(request head) and closes.
func rawServer(t *testing.T, answer func(head string) string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(c)
			var head strings.Builder
			for {
				line, err := br.ReadString('\n')
				head.WriteString(line)
				if err != nil || line == "\r\n" {
					break
				}
			}
			c.Write([]byte(answer(head.String())))
			c.Close()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestHostileMalformedEcho: a server answers with a line of the request
// as its status line or as a header line without a colon (a broken echo),
// or with a huge malformed line. net/http quotes the line in its error:
// the credential must not come back in the reason, and the result must
// still fit.
func TestHostileMalformedEcho(t *testing.T) {
	for _, tc := range []struct{ name, auth, answer string }{
		{"query status line", "auth = \"query\"\nparam = \"api_key\"", "status"},
		{"bearer header line", "auth = \"bearer\"", "header"},
		{"header value", "auth = \"header\"\nheader = \"X-Api-Key\"", "header"},
		{"huge malformed line", "auth = \"bearer\"", "huge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := rawServer(t, func(head string) string {
				lines := strings.Split(head, "\r\n")
				switch tc.answer {
				case "status":
					return lines[0] + "\r\n\r\n"
				case "huge":
					return "HTTP/1.1 200 OK\r\n" + strings.Repeat("x", 300<<10) + "\r\n\r\n"
				}
				for _, l := range lines {
					if strings.Contains(l, apiToken) {
						return "HTTP/1.1 200 OK\r\n" + strings.ReplaceAll(l, ":", "") + "\r\n\r\n"
					}
				}
				return "HTTP/1.1 500 no\r\n\r\n"
			})
			f := hostileGateway(t, fmt.Sprintf("base_url = %q\ntoken_secret = \"api-token\"\n%s", url, tc.auth))
			r := f.gw.HTTPRequest(context.Background(), HTTPRequestInput{Endpoint: "api", Method: "GET", Path: "/x"}, nil)
			if out, ok := r.Structured.(*HTTPRequestOutput); !ok || out.Status != StatusFailed || out.Handle == "" {
				t.Fatalf("got %q; want a failed result with a handle", output.Clip(r.Text, 300))
			}
			checkNoPieceOf(t, apiToken, structured(t, r)+r.Text+readAudit(t, f))
		})
	}
}

// TestHostileStalledBodyCancelled: a server sends its headers and a first
// line, then holds the body open forever (a slowloris answer). The
// request goes on in the background; cancel_action ends it at once, with
// what came, and the next request on the endpoint is answered.
func TestHostileStalledBodyCancelled(t *testing.T) {
	release := make(chan struct{})
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stall" {
			fmt.Fprintln(w, "first line "+r.Header.Get("Authorization"))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		fmt.Fprintln(w, "fine")
	}))
	t.Cleanup(func() { close(release); api.Close() })
	f := hostileGateway(t, fmt.Sprintf("base_url = %q\nauth = \"bearer\"\ntoken_secret = \"api-token\"\ntimeout = \"1h\"\nmax_timeout = \"1h\"", api.URL))
	ctx := context.Background()
	zero := 0.0
	r := f.gw.HTTPRequest(ctx, HTTPRequestInput{Endpoint: "api", Method: "GET", Path: "/stall", WaitS: &zero}, nil)
	out, ok := r.Structured.(*HTTPRequestOutput)
	if !ok || out.Status != StatusRunning {
		t.Fatalf("got %q; want it running in the background", r.Text)
	}
	// Wait for the first line: the request is in its body.
	one := 30.0
	for i := 0; ; i++ {
		rd := f.gw.ReadOutput(ctx, ReadOutputInput{Handle: out.Handle, Stream: "body", WaitS: one})
		if strings.Contains(structured(t, rd), "first line") {
			break
		}
		if rd.IsError || i == 20 {
			t.Fatalf("read_output: %s; want the first line", rd.Text)
		}
	}
	c := f.gw.CancelAction(ctx, CancelActionInput{Handle: out.Handle})
	got, ok := c.Structured.(*HTTPRequestOutput)
	if !ok || got.Status != StatusCancelled {
		t.Fatalf("cancel_action: %q; want cancelled", c.Text)
	}
	if !strings.Contains(got.Body.Head, "first line Bearer [REDACTED:api-token]") {
		t.Errorf("body %q; want the first line, redacted", got.Body.Head)
	}
	r = f.gw.HTTPRequest(ctx, HTTPRequestInput{Endpoint: "api", Method: "GET", Path: "/next"}, nil)
	if out, ok := r.Structured.(*HTTPRequestOutput); !ok || out.Status != StatusOK || out.Body.Head != "fine\n" {
		t.Errorf("the next request: %q; want ok", r.Text)
	}
	checkNoPieceOf(t, apiToken, structured(t, c)+c.Text+readAudit(t, f))
}

// TestHostileSecretLearnedWhileStreaming: an agent starts a request whose
// answer streams (endpoint pub, no credential), then makes endpoint api
// fetch its first OAuth2 access token from the same server, which writes
// every Authorization it sees into pub's stream (a request log). The
// token was learned after pub's capture took its redactor; and a secret
// that a reload adds while pub streams is in the same place. Both must
// come back redacted.
func TestHostileSecretLearnedWhileStreaming(t *testing.T) {
	const added = "added-by-reload-7f3e9c1d"
	echo := make(chan string, 1)
	var mu sync.Mutex
	var issued string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/token":
			mu.Lock()
			issued = "at-" + rand.Text()
			tok := issued
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
		case "/stream":
			// Not a line of base64 characters, whose break a stream
			// holds until the next byte, nor one that ends in the first
			// byte of a form of a secret, which it holds too.
			fmt.Fprintln(w, "streaming:")
			w.(http.Flusher).Flush()
			// Split across writes, as a log line may come. A test that
			// failed before its echo ends the wait with the server's Close,
			// which would wait for this handler.
			var seen string
			select {
			case seen = <-echo:
			case <-r.Context().Done():
				return
			}
			line := "seen: " + seen + "\n"
			fmt.Fprint(w, line[:12])
			w.(http.Flusher).Flush()
			fmt.Fprint(w, line[12:])
		default:
			echo <- r.Header.Get("Authorization")
		}
	}))
	t.Cleanup(srv.Close)
	toml := func(extra string) string {
		return fmt.Sprintf(`[server]
state_dir = %q
[http.pub]
base_url = %q
methods = ["GET"]
allow_private = true
[http.api]
base_url = %q
methods = ["GET"]
allow_private = true
auth = "oauth2_client_credentials"
token_url = %q
client_id = "id"
client_secret_secret = "client-secret"
%s`, t.TempDir(), srv.URL, srv.URL, srv.URL+"/token", extra)
	}
	cfg, err := config.Parse([]byte(toml("")))
	if err != nil {
		t.Fatal(err)
	}
	store := secrets.Memory{"client-secret": []byte("cs-4b8e2a91d0"), "added": []byte(added)}
	gw := New(context.Background(), Options{Config: cfg, Secrets: store})
	if _, err := gw.Config(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	ctx := context.Background()

	// stream starts pub's streaming request, waits for its first line,
	// then has its echo written by trigger and returns its final result.
	stream := func(t *testing.T, trigger func()) *ToolResult {
		t.Helper()
		zero, wait := 0.0, 30.0
		r := gw.HTTPRequest(ctx, HTTPRequestInput{Endpoint: "pub", Method: "GET", Path: "/stream", WaitS: &zero}, nil)
		out, ok := r.Structured.(*HTTPRequestOutput)
		if !ok || out.Status != StatusRunning {
			t.Fatalf("got %q; want it running", r.Text)
		}
		for i := 0; ; i++ {
			rd := gw.ReadOutput(ctx, ReadOutputInput{Handle: out.Handle, Stream: "body", WaitS: wait})
			if strings.Contains(structured(t, rd), "streaming:") {
				break
			}
			if rd.IsError || i == 20 {
				t.Fatalf("read_output: %s; want the first line", rd.Text)
			}
		}
		trigger()
		return gw.ActionStatus(ctx, ActionStatusInput{Handle: out.Handle, WaitS: &wait}, nil)
	}

	t.Run("access token", func(t *testing.T) {
		st := stream(t, func() {
			if r := gw.HTTPRequest(ctx, HTTPRequestInput{Endpoint: "api", Method: "GET", Path: "/v1/items"}, nil); r.IsError {
				t.Fatalf("api: %s", r.Text)
			}
		})
		out := st.Structured.(*HTTPRequestOutput)
		if want := "streaming:\nseen: Bearer [REDACTED:api.access_token]\n"; out.Body.Head != want {
			t.Errorf("body %q; want %q", out.Body.Head, want)
		}
		mu.Lock()
		tok := issued
		mu.Unlock()
		checkNoPieceOf(t, tok, structured(t, st)+st.Text)
	})
	t.Run("secret added by a reload", func(t *testing.T) {
		st := stream(t, func() {
			cfg, err := config.Parse([]byte(toml("[http.other]\nbase_url = \"https://other.example\"\nauth = \"bearer\"\ntoken_secret = \"added\"\n")))
			if err != nil {
				t.Fatal(err)
			}
			if err := gw.Reload(ctx, cfg, nil); err != nil {
				t.Fatal(err)
			}
			echo <- added
		})
		out := st.Structured.(*HTTPRequestOutput)
		if want := "streaming:\nseen: [REDACTED:added]\n"; out.Body.Head != want {
			t.Errorf("body %q; want %q", out.Body.Head, want)
		}
		checkNoPieceOf(t, added, structured(t, st)+st.Text)
	})
}
