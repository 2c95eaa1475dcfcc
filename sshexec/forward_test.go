package sshexec

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// echoServer accepts connections on loopback and echoes each line back
// with its connection's number, until the test ends. It returns its
// address and a channel that gets each connection's number when the
// connection closes.
func echoServer(t *testing.T) (string, <-chan int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan int, 100)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer func() { c.Close(); closed <- n }()
				stop := context.AfterFunc(t.Context(), func() { c.Close() })
				defer stop()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					fmt.Fprintf(c, "%d %s", n, line)
				}
			})
		}
	})
	return ln.Addr().String(), closed
}

func tunnelTo(t *testing.T, p *Pool, tg *Target, addr string) (net.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return p.DialTCP(ctx, tg, addr)
}

func echo(t *testing.T, c net.Conn, line string) string {
	t.Helper()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return strings.TrimSuffix(got, "\n")
}

// TestDialTCP opens connections through the server to a loopback
// service: sshd opens them (its log says so), many at once share one
// login, and a closed tunnel closes the service's connection.
func TestDialTCP(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{LogLevel: "DEBUG1"})
	p := newPool(t)
	tg := target(s)
	addr, closed := echoServer(t)
	_, port, _ := net.SplitHostPort(addr)

	var conns []net.Conn
	for i := range 4 {
		c, err := tunnelTo(t, p, tg, addr)
		if err != nil {
			t.Fatalf("DialTCP %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	for i, c := range conns {
		if got, want := echo(t, c, "hello "+strconv.Itoa(i)), " hello "+strconv.Itoa(i); !strings.HasSuffix(got, want) {
			t.Errorf("echo on tunnel %d: got %q", i, got)
		}
	}
	if got := logins(s); got != 1 {
		t.Errorf("logins for 4 tunnels: got %d; want 1", got)
	}
	if want := "target 127.0.0.1 port " + port; strings.Count(s.Log(), want) != 4 {
		t.Errorf("sshd's log shows %d direct-tcpip opens to %q; want 4:\n%s", strings.Count(s.Log(), want), want, s.Log())
	}
	conns[0].Close()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("closing the tunnel did not close the service's connection")
	}
	for _, c := range conns[1:] {
		c.Close()
	}
}

// TestDialTCPRefused: a server that forbids the forwarding, or cannot
// connect, answers with a *ForwardError that says which, and the first
// names the sshd_config lines that allow it.
func TestDialTCPRefused(t *testing.T) {
	addr, _ := echoServer(t)
	dead := net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(t)))
	for _, tc := range []struct {
		name       string
		config     []string
		addr       string
		reason     ssh.RejectionReason
		prohibited bool
	}{
		{"PermitOpen none", []string{"PermitOpen none"}, addr, ssh.Prohibited, true},
		{"AllowTcpForwarding no", []string{"AllowTcpForwarding no"}, addr, ssh.Prohibited, true},
		{"PermitOpen another", []string{"PermitOpen 127.0.0.1:1"}, addr, ssh.Prohibited, true},
		{"nothing listening", nil, dead, ssh.ConnectionFailed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sshtest.Start(t, sshtest.Options{Config: tc.config})
			p := newPool(t)
			c, err := tunnelTo(t, p, target(s), tc.addr)
			if err == nil {
				c.Close()
				t.Fatal("DialTCP succeeded")
			}
			var fe *ForwardError
			if !errors.As(err, &fe) || fe.Reason != tc.reason || fe.Prohibited() != tc.prohibited {
				t.Fatalf("got %T %v; want a *ForwardError with reason %v", err, err, tc.reason)
			}
			t.Log(err)
			if tc.prohibited {
				for _, want := range []string{"AllowTcpForwarding local", `"PermitOpen ` + tc.addr + `"`} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not name %q", err, want)
					}
				}
			}
			// The connection stays usable.
			if out, err := runCmd(t, p, target(s), "echo ok"); err != nil || out.stdout != "ok\n" {
				t.Errorf("run after the refusal: %+v, %v", out, err)
			}
		})
	}
}

// TestDialTCPConnLost: when the server dies, a tunnel's Read fails with
// a *ConnLostError, and the next DialTCP dials again.
func TestDialTCPConnLost(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	tg := target(s)
	addr, _ := echoServer(t)
	c, err := tunnelTo(t, p, tg, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	echo(t, c, "before")
	s.Crash()
	_, err = c.Read(make([]byte, 10))
	var lost *ConnLostError
	if !errors.As(err, &lost) || lost.Target != tg.Name || lost.Addr != addr {
		t.Fatalf("read after the crash: got %T %v; want a *ConnLostError", err, err)
	}
	s.Restart()
	c2, err := tunnelTo(t, p, tg, addr)
	if err != nil {
		t.Fatalf("DialTCP after the restart: %v", err)
	}
	defer c2.Close()
	if got := echo(t, c2, "after"); !strings.HasSuffix(got, " after") {
		t.Errorf("echo after the restart: %q", got)
	}
}

// TestDialTCPRemoteClose: the service closing its side is a plain EOF,
// not a lost connection.
func TestDialTCPRemoteClose(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		if c, err := ln.Accept(); err == nil {
			io.WriteString(c, "bye")
			c.Close()
		}
	})
	c, err := tunnelTo(t, p, target(s), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "bye" {
		t.Fatalf("ReadAll: %q, %v; want \"bye\", nil", b, err)
	}
}

// TestDialTCPDeadline: a deadline that passes ends a Read that waits,
// with os.ErrDeadlineExceeded, and closes the tunnel.
func TestDialTCPDeadline(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	addr, closed := echoServer(t)
	c, err := tunnelTo(t, p, target(s), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := c.Read(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v; want os.ErrDeadlineExceeded", err)
	}
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the deadline did not close the service's connection")
	}
}
