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
)

const nginxConf = `daemon off;
master_process off;
worker_processes 1;
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
		listen 127.0.0.1:{{port}};
		location = /api/echo { add_header X-Request-Id nginx-echo; return 200 "auth=$http_authorization host=$host\n"; }
		location = /api/small { return 200 "hello\n"; }
		location = /api/away { return 302 {{other}}/steal; }
		location = /api/busy { add_header Retry-After 1 always; return 503 "busy\n"; }
		location = /api/big { alias {{dir}}/big.bin; }
		location / { return 404; }
	}
}
`

// startNginx runs Debian's nginx as a child process on a loopback port,
// with /api/away redirecting to other, and stops it by its PID when the test
// ends. It returns the server's base URL.
func startNginx(tb testing.TB, other string) string {
	tb.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin = "/usr/sbin/nginx"
		if _, err := os.Stat(bin); err != nil {
			if os.Getenv("CI") != "" {
				tb.Fatal("nginx is not installed (apt-get install -y nginx)")
			}
			tb.Skip("nginx is not installed (apt-get install -y nginx)")
		}
	}
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

	for try := 0; ; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		conf := strings.NewReplacer("{{dir}}", dir, "{{port}}", fmt.Sprint(port), "{{other}}", other).Replace(nginxConf)
		confPath := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
			tb.Fatal(err)
		}
		cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"))
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		if err := cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		stop := func() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if waitListening(addr, exited) {
			tb.Cleanup(stop)
			return "http://" + addr
		}
		stop()
		log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		if try == 2 {
			tb.Fatalf("nginx did not start: %s\n%s", stderr.String(), log)
		}
	}
}

// waitListening waits until addr accepts a connection, or the process
// exits, or 10 s pass.
func waitListening(addr string, exited <-chan struct{}) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
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
		if res.Status != StatusHTTPError || res.HTTPStatus != 503 || res.Attempts != 2 || time.Since(start) < 900*time.Millisecond {
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
