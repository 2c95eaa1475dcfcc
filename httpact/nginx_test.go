//go:build unix

package httpact

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// nginxConf runs nginx in the foreground on the listening socket it
// inherits (see startNginx). Workers run as the user the test runs as
// ({{user}}), so they can read the test's private directory.
const nginxConf = `daemon off;
master_process on;
worker_processes 1;
{{user}}
pid {{dir}}/nginx.pid;
error_log {{dir}}/error.log warn;
events { worker_connections 256; }
http {
	access_log off;
	client_body_temp_path {{dir}}/tmp/body;
	proxy_temp_path {{dir}}/tmp/proxy;
	fastcgi_temp_path {{dir}}/tmp/fastcgi;
	uwsgi_temp_path {{dir}}/tmp/uwsgi;
	scgi_temp_path {{dir}}/tmp/scgi;
	default_type text/plain;
	keepalive_requests 1000000;
	server {
		listen {{addr}};
		location = /api/echo {
			gzip on; gzip_types text/plain; gzip_min_length 1;
			add_header X-Request-Id nginx-echo;
			return 200 "auth=$http_authorization host=$host\n";
		}
		location = /api/small { return 200 "hello\n"; }
		location = /api/away { return 302 {{other}}/steal; }
		location = /api/hop { return 302 /api/referer; }
		location = /api/referer { return 200 "referer=$http_referer args=$args\n"; }
		location = /api/busy { add_header Retry-After 1 always; return 503 "busy\n"; }
		location = /api/big { alias {{dir}}/big.bin; }
		location = /api/token { alias {{dir}}/token.txt; }
		location / { return 404; }
	}
}
`

// startNginx runs Debian's nginx as a child process on a loopback port,
// with /api/away redirecting to other, and stops it when the test ends. It
// returns the server's base URL.
//
// The test listens and nginx inherits the socket (the NGINX environment
// variable of its binary upgrade), so connections queue from the start and
// no port is raced for: a request needs no wait for nginx to be ready, and
// fails at once if nginx has exited, since then nothing holds the socket.
func startNginx(tb testing.TB, other string) string {
	tb.Helper()
	bin := testenv.Command(tb, "nginx", "nginx")
	dir := tb.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		tb.Fatal(err)
	}
	big, err := os.Create(filepath.Join(dir, "big.bin"))
	if err != nil {
		tb.Fatal(err)
	}
	if err := big.Truncate(64 << 20); err != nil { // sparse: costs no disk
		tb.Fatal(err)
	}
	big.Close()
	if err := os.WriteFile(filepath.Join(dir, "token.txt"), []byte("token="+testToken+"\n"), 0o644); err != nil {
		tb.Fatal(err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l.Addr().String()
	sock, err := l.(*net.TCPListener).File() // a duplicate for nginx
	l.Close()
	if err != nil {
		tb.Fatal(err)
	}
	defer sock.Close() // once nginx has its copy

	user := ""
	if os.Geteuid() == 0 {
		user = "user root;" // the default, nobody, cannot enter dir
	}
	conf := strings.NewReplacer("{{dir}}", dir, "{{addr}}", addr, "{{other}}", other, "{{user}}", user).Replace(nginxConf)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"))
	cmd.ExtraFiles = []*os.File{sock} // fd 3
	cmd.Env = append(os.Environ(), "NGINX=3;")
	// Its own process group: the worker goes with the master if the
	// master has to be killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM) // the master stops its worker, then exits
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if tb.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			tb.Logf("nginx output: %s\nerror.log:\n%s", stderr.String(), log)
		}
	})
	return "http://" + addr
}

func TestNginx(t *testing.T) {
	var otherHits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { otherHits.Add(1) }))
	defer other.Close()
	base := startNginx(t, other.URL)
	c, logs := newTestClient(t)
	e := &Endpoint{
		Name: "nginx", BaseURL: base + "/api",
		Auth: bearer(), AllowPrivate: true, FollowRedirects: RedirectsSameOrigin,
		Retry:           RetryPolicy{MaxAttempts: 2},
		ResponseHeaders: []string{"Content-Type", "Content-Length", "Location", "X-Request-Id"},
	}
	do := func(t *testing.T, req Request, w io.Writer) *Result {
		t.Helper()
		res, err := c.Do(context.Background(), e, req, w)
		if err != nil {
			t.Fatal(err)
		}
		checkNoSecret(t, logs, res)
		return res
	}

	t.Run("credential at the origin", func(t *testing.T) {
		var body bytes.Buffer
		res := do(t, Request{Method: "GET", Path: "/echo"}, &body)
		if want := "auth=Bearer " + testToken + " host=127.0.0.1\n"; res.Status != StatusOK || body.String() != want {
			t.Errorf("got %s %q; want ok %q", res.Status, body.String(), want)
		}
		if res.Headers["x-request-id"] != "nginx-echo" {
			t.Errorf("headers %v; want the request id", res.Headers)
		}
	})
	t.Run("Accept-Encoding refused, and what it would do", func(t *testing.T) {
		_, err := c.Do(context.Background(), e, Request{Method: "GET", Path: "/echo", Headers: map[string]string{"Accept-Encoding": "gzip"}}, io.Discard)
		wantRequestError(t, err, "headers", "Accept-Encoding", "allow_special_headers")
		e := *e
		e.AllowSpecialHeaders = []string{"Accept-Encoding"}
		var body bytes.Buffer
		res, err := c.Do(context.Background(), &e, Request{Method: "GET", Path: "/echo", Headers: map[string]string{"Accept-Encoding": "gzip"}}, &body)
		if err != nil || res.Status != StatusOK {
			t.Fatalf("%+v, %v; want ok", res, err)
		}
		if bytes.Contains(body.Bytes(), []byte(testToken)) || !strings.Contains(gunzip(t, body.Bytes()), testToken) {
			t.Errorf("allowed: body %q; want the token inside gzip", body.String())
		}
	})
	t.Run("Range refused", func(t *testing.T) {
		_, err := c.Do(context.Background(), e, Request{Method: "GET", Path: "/token", Headers: map[string]string{"Range": "bytes=6-11"}}, io.Discard)
		wantRequestError(t, err, "headers", "Range", "allow_special_headers")
		e := *e
		e.AllowSpecialHeaders = []string{"Range"}
		var body bytes.Buffer
		res, err := c.Do(context.Background(), &e, Request{Method: "GET", Path: "/token", Headers: map[string]string{"Range": "bytes=6-11"}}, &body)
		if err != nil || res.HTTPStatus != http.StatusPartialContent || body.String() != testToken[:6] {
			t.Errorf("allowed: %+v, %v, body %q; want 206 with %q", res, err, body.String(), testToken[:6])
		}
	})
	t.Run("no Referer on a followed redirect", func(t *testing.T) {
		e := *e
		e.Auth = Auth{Kind: AuthQuery, Param: "api_key", Token: []byte(testToken)}
		var body bytes.Buffer
		res, err := c.Do(context.Background(), &e, Request{Method: "GET", Path: "/hop"}, &body)
		if err != nil || res.Status != StatusOK || body.String() != "referer= args=\n" {
			t.Errorf("%+v, %v, body %q; want the landing with no Referer", res, err, body.String())
		}
	})
	t.Run("other origin not followed", func(t *testing.T) {
		res := do(t, Request{Method: "GET", Path: "/away"}, io.Discard)
		if res.HTTPStatus != 302 || res.Headers["location"] != other.URL+"/steal" || otherHits.Load() != 0 {
			t.Errorf("got %d, location %q, other origin hit %d times; want the 302 returned and no hit",
				res.HTTPStatus, res.Headers["location"], otherHits.Load())
		}
	})
	t.Run("GET retried on 503 with Retry-After", func(t *testing.T) {
		start := time.Now()
		res := do(t, Request{Method: "GET", Path: "/busy"}, io.Discard)
		// A lower bound the client's wait enforces, however loaded the
		// machine: Retry-After: 1 was honoured.
		if res.Status != StatusHTTPError || res.HTTPStatus != 503 || res.Attempts != 2 || time.Since(start) < time.Second {
			t.Errorf("got %s %d after %d attempts in %v; want 503 after 2 attempts a second apart",
				res.Status, res.HTTPStatus, res.Attempts, time.Since(start))
		}
	})
	t.Run("POST not retried", func(t *testing.T) {
		res := do(t, Request{Method: "POST", Path: "/busy", Body: []byte("{}"), JSON: true}, io.Discard)
		if res.HTTPStatus != 503 || res.Attempts != 1 {
			t.Errorf("got %d after %d attempts; want 503 after 1", res.HTTPStatus, res.Attempts)
		}
	})
	t.Run("large body cut then next request", func(t *testing.T) {
		e := *e
		e.MaxResponseBody = 1 << 20
		res, err := c.Do(context.Background(), &e, Request{Method: "GET", Path: "/big"}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != StatusBodyLimit || res.BodyBytes != 1<<20 || res.Headers["content-length"] != fmt.Sprint(64<<20) {
			t.Errorf("got %s, %d bytes, headers %v; want body_limit at 1 MiB of 64 MiB", res.Status, res.BodyBytes, res.Headers)
		}
		var body bytes.Buffer
		if res := do(t, Request{Method: "GET", Path: "/small"}, &body); res.Status != StatusOK || body.String() != "hello\n" {
			t.Errorf("next request: %s %q; want ok", res.Status, body.String())
		}
	})
}
