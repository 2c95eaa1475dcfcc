package proxytest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// Proxy is an HTTP proxy on loopback that a test started; it stops when the
// test ends.
type Proxy struct {
	// Addr is the host:port clients connect to: "http://"+Addr is the
	// proxy's URL.
	Addr string

	mu       sync.Mutex
	sent     []*bytes.Buffer // what each client connection sent, in accept order
	requests func() []string

	ln      net.Listener
	wg      sync.WaitGroup
	conns   map[net.Conn]bool
	stopped bool
}

// Conns returns what each client connection has sent the proxy so far,
// in the order the proxy accepted them: what the proxy could read. A
// connection is counted when it is accepted and a byte recorded before the
// proxy reads it, so once a client has an answer through the proxy, its
// connection and everything it sent for it are here.
func (p *Proxy) Conns() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, len(p.sent))
	for i, b := range p.sent {
		out[i] = b.String()
	}
	return out
}

// Sent returns every byte clients have sent the proxy so far, the
// connections one after the other.
func (p *Proxy) Sent() string { return strings.Join(p.Conns(), "") }

// Requests returns the request lines the proxy has read so far, as it
// logged them ("CONNECT host:port HTTP/1.1", "GET http://host/x HTTP/1.1").
func (p *Proxy) Requests() []string { return p.requests() }

// serve accepts connections on p.ln and hands each to handle with a
// reader that records what the client sends; Stop ends them all.
func (p *Proxy) serve(handle func(client net.Conn, r io.Reader)) {
	p.conns = map[net.Conn]bool{}
	p.wg.Go(func() {
		for {
			c, err := p.ln.Accept()
			if err != nil {
				return
			}
			rec := recorder{p: p, r: c, b: &bytes.Buffer{}}
			p.mu.Lock()
			stopped := p.stopped
			p.conns[c] = true
			p.sent = append(p.sent, rec.b)
			p.mu.Unlock()
			if stopped { // accepted as stop closed the others
				c.Close()
				return
			}
			p.wg.Go(func() {
				defer func() {
					c.Close()
					p.mu.Lock()
					delete(p.conns, c)
					p.mu.Unlock()
				}()
				handle(c, rec)
			})
		}
	})
}

// stop closes the listener and every connection, and waits for their
// goroutines.
func (p *Proxy) stop() {
	p.ln.Close()
	p.mu.Lock()
	p.stopped = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// recorder reads from a client, appending what it read to b, one of
// Proxy.sent.
type recorder struct {
	p *Proxy
	r io.Reader
	b *bytes.Buffer
}

func (r recorder) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.p.mu.Lock()
	r.b.Write(b[:n])
	r.p.mu.Unlock()
	return n, err
}

// relay copies between a client (read through r) and upstream until
// either side ends.
func relay(client net.Conn, r io.Reader, upstream net.Conn) {
	done := make(chan struct{})
	go func() {
		io.Copy(client, upstream)
		client.Close() // ends the copy below
		close(done)
	}()
	io.Copy(upstream, r)
	upstream.Close() // ends the copy above
	<-done
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// StartGo starts a proxy written in Go: CONNECT opens a tunnel, a request
// in absolute form is forwarded, as tinyproxy does. resolve maps the
// host:port a client names to the address the proxy dials, so that a
// test can use names no DNS knows; "" answers 403, as a proxy's access
// rules would. A nil resolve dials the name as it is.
func StartGo(t testing.TB, resolve func(hostport string) string) *Proxy {
	t.Helper()
	if resolve == nil {
		resolve = func(hostport string) string { return hostport }
	}
	p := &Proxy{ln: listen(t)}
	p.Addr = p.ln.Addr().String()
	var lines []string
	p.requests = func() []string {
		p.mu.Lock()
		defer p.mu.Unlock()
		return append([]string(nil), lines...)
	}
	forward := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if a := resolve(addr); a != "" {
				return (&net.Dialer{}).DialContext(ctx, network, a)
			}
			return nil, errors.New("refused by the proxy")
		},
	}
	p.serve(func(client net.Conn, r io.Reader) {
		br := bufio.NewReader(r)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			p.mu.Lock()
			lines = append(lines, req.Method+" "+req.RequestURI+" "+req.Proto)
			p.mu.Unlock()
			if req.Method == http.MethodConnect {
				addr := resolve(req.RequestURI)
				var upstream net.Conn
				if addr != "" {
					upstream, err = net.Dial("tcp", addr)
				}
				if addr == "" || err != nil {
					io.WriteString(client, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
					return
				}
				io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n")
				relay(client, br, upstream)
				return
			}
			req.RequestURI = ""
			resp, err := forward.RoundTrip(req)
			if err != nil {
				io.WriteString(client, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
				return
			}
			err = resp.Write(client)
			resp.Body.Close()
			if err != nil {
				return
			}
		}
	})
	t.Cleanup(func() {
		p.stop()
		forward.CloseIdleConnections()
	})
	return p
}

// tinyproxyConf runs tinyproxy in the foreground, for loopback clients
// only, logging each request line into the test's directory.
const tinyproxyConf = `Port {{port}}
Listen 127.0.0.1
Timeout 60
LogFile "{{dir}}/tinyproxy.log"
LogLevel Info
PidFile "{{dir}}/tinyproxy.pid"
MaxClients 64
Allow 127.0.0.1
DisableViaHeader Yes
`

// StartTinyproxy starts Debian's tinyproxy on a loopback port with its own
// config and log in a temporary directory (not the system service), behind
// a relay on Addr that records what clients send (Sent); Requests reads
// tinyproxy's log. Without tinyproxy it ends t with testenv.Missing.
func StartTinyproxy(t testing.TB) *Proxy {
	t.Helper()
	bin := testenv.Command(t, "tinyproxy", "tinyproxy")
	dir := t.TempDir()
	logPath := filepath.Join(dir, "tinyproxy.log")
	var upstream string
	// tinyproxy binds a port from its config: one free a moment ago may
	// be taken by then, and tinyproxy then exits; try another.
	for attempt := 0; upstream == ""; attempt++ {
		ln := listen(t)
		addr := ln.Addr().String()
		ln.Close()
		_, port, _ := net.SplitHostPort(addr)
		conf := strings.NewReplacer("{{port}}", port, "{{dir}}", dir).Replace(tinyproxyConf)
		confPath := filepath.Join(dir, "tinyproxy.conf")
		if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Remove(logPath)
		var out bytes.Buffer
		cmd := exec.Command(bin, "-d", "-c", confPath)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
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
		ready := testenv.Eventually(time.Minute, func() bool {
			select {
			case <-exited:
				return true
			default:
			}
			log, _ := os.ReadFile(logPath)
			return bytes.Contains(log, []byte("Accepting connections"))
		})
		select {
		case <-exited:
			log, _ := os.ReadFile(logPath)
			if attempt == 4 {
				t.Fatalf("tinyproxy exited: %s\n%s", out.String(), log)
			}
			continue
		default:
		}
		if !ready {
			stop()
			t.Fatal("tinyproxy did not start listening within a minute")
		}
		upstream = addr
		t.Cleanup(func() {
			stop()
			if t.Failed() {
				log, _ := os.ReadFile(logPath)
				t.Logf("tinyproxy's log:\n%s", log)
			}
		})
	}

	p := &Proxy{ln: listen(t)}
	p.Addr = p.ln.Addr().String()
	p.requests = func() []string {
		log, _ := os.ReadFile(logPath)
		var lines []string
		for _, l := range strings.Split(string(log), "\n") {
			// CONNECT   Nov 30 21:55:15.572 [10768]: Request (file descriptor 5): CONNECT vm:1 HTTP/1.1
			if _, req, ok := strings.Cut(l, "): "); ok && strings.Contains(l, "Request (file descriptor") {
				lines = append(lines, req)
			}
		}
		return lines
	}
	p.serve(func(client net.Conn, r io.Reader) {
		up, err := net.Dial("tcp", upstream)
		if err != nil {
			return
		}
		relay(client, r, up)
	})
	t.Cleanup(p.stop) // before tinyproxy stops: cleanups run last first
	return p
}

// WaitRequest waits for the proxy to have read a request line that starts
// with prefix (a proxy may log a line after it answered), and fails t if
// none comes within a minute.
func (p *Proxy) WaitRequest(t testing.TB, prefix string) {
	t.Helper()
	testenv.WaitFor(t, time.Minute, fmt.Sprintf("the proxy to read a request line starting with %q", prefix), func() bool {
		for _, l := range p.Requests() {
			if strings.HasPrefix(l, prefix) {
				return true
			}
		}
		return false
	})
}
