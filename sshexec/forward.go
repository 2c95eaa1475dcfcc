package sshexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// ForwardError reports that a target's server would not open a TCP
// connection for DialTCP: it refused the direct-tcpip channel (what
// ssh -L asks for), or could not connect to the address itself.
type ForwardError struct {
	Target string
	Addr   string // host:port as asked, resolved by the server
	// Reason is the server's reason code: ssh.Prohibited when its
	// configuration forbids the forwarding, ssh.ConnectionFailed when it
	// could not connect (or resolve the name).
	Reason ssh.RejectionReason
	// Message is the server's text, clipped, without control characters.
	Message string
}

// Prohibited reports whether the server's configuration forbids the
// forwarding (AllowTcpForwarding, PermitOpen, DisableForwarding, or a
// restriction on the key or certificate), as opposed to a connection
// that failed.
func (e *ForwardError) Prohibited() bool { return e.Reason == ssh.Prohibited }

func (e *ForwardError) Error() string {
	if e.Prohibited() {
		return fmt.Sprintf("target %q refused to open a TCP connection to %s (sshd answered the direct-tcpip channel "+
			"with \"administratively prohibited: %s\"): it does not let this login forward there. In its sshd_config, "+
			"\"AllowTcpForwarding no\" (or remote, or \"DisableForwarding yes\") forbids all forwarding: set "+
			"\"AllowTcpForwarding local\"; a PermitOpen line that does not list the address forbids it: add "+
			"\"PermitOpen %s\" (a Match User block can confine both to this login); then reload sshd. "+
			"A \"restrict\" or \"no-port-forwarding\" option on the key in authorized_keys forbids it too",
			e.Target, e.Addr, e.Message, e.Addr)
	}
	return fmt.Sprintf("target %q could not connect to %s for the tunnel (%s: %s)", e.Target, e.Addr, e.Reason, e.Message)
}

// ConnLostError reports a TCP connection through a target (DialTCP)
// that broke because the SSH connection carrying it was lost: the
// server went away, stopped answering keepalives, or the pool closed.
// The next DialTCP dials a new SSH connection.
type ConnLostError struct {
	Target string
	Addr   string
	Err    error // why the SSH connection closed
}

func (e *ConnLostError) Error() string {
	why := e.Err.Error()
	if errors.Is(e.Err, io.EOF) {
		why = "the server closed it or went away"
	}
	return fmt.Sprintf("target %q: the SSH connection that carried the connection to %s was lost (%s); the next request dials it again",
		e.Target, e.Addr, why)
}

func (e *ConnLostError) Unwrap() error { return e.Err }

// directTCPIP is the type-specific data of a direct-tcpip channel
// (RFC 4254, 7.2).
type directTCPIP struct {
	Host     string
	Port     uint32
	OrigHost string
	OrigPort uint32
}

// DialTCP opens a TCP connection from t's server to addr ("host:port"),
// as ssh -L does: a direct-tcpip channel on t's pooled connection (one
// is dialled when none is open), so the server resolves the host name
// and its network is the one reached. The channel takes none of the
// connection's session slots (OpenSSH's MaxSessions counts sessions
// only): the caller bounds how many it keeps open. ctx bounds the dial
// and the channel's opening, not the connection returned.
//
// A server that refuses the channel gives a *ForwardError. Once the SSH
// connection under it is lost, the connection's Read and Write fail with
// a *ConnLostError; a deadline that passes closes it (a channel cannot
// time out a waiting Read or Write), and they fail with
// os.ErrDeadlineExceeded.
func (p *Pool) DialTCP(ctx context.Context, t *Target, addr string) (net.Conn, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	host, portStr, err := net.SplitHostPort(addr)
	port, perr := strconv.ParseUint(portStr, 10, 16)
	if err != nil || perr != nil || host == "" || port == 0 {
		return nil, fmt.Errorf("target %q: %q is not a host:port to connect to", t.Name, addr)
	}
	data := ssh.Marshal(&directTCPIP{Host: host, Port: uint32(port), OrigHost: "127.0.0.1"})
	for redials := 0; ; redials++ {
		c, err := p.conn(ctx, t)
		if err != nil {
			return nil, err
		}
		ch, reqs, err := c.openChannel(ctx, "direct-tcpip", data)
		if err == nil {
			return c.tunnel(ch, reqs, addr)
		}
		var refused *ssh.OpenChannelError
		switch {
		case errors.As(err, &refused):
			return nil, &ForwardError{Target: t.Name, Addr: addr, Reason: refused.Reason, Message: clipText(refused.Message, 200)}
		case ctx.Err() != nil:
			return nil, err
		case redials > 0:
			return nil, fmt.Errorf("target %q: open a connection to %s: %w", t.Name, addr, err)
		}
		// The connection died before the pool saw it: dial a new one.
		c.close(fmt.Errorf("open a direct-tcpip channel: %w", err))
	}
}

// tunnel wraps an open direct-tcpip channel as a net.Conn, counting it
// as a use of c until it closes.
func (c *conn) tunnel(ch ssh.Channel, reqs <-chan *ssh.Request, addr string) (net.Conn, error) {
	c.pool.mu.Lock()
	if c.pool.closed {
		c.pool.mu.Unlock()
		ch.Close()
		return nil, ErrPoolClosed
	}
	c.pool.wg.Add(1)
	c.pool.mu.Unlock()
	go func() {
		defer c.pool.wg.Done()
		ssh.DiscardRequests(reqs) // ends when the channel closes
	}()
	c.mu.Lock()
	c.tunnels++
	c.mu.Unlock()
	return &tunnelConn{Channel: ch, c: c, addr: addr}, nil
}

// tunnelConn is a TCP connection through a target: a direct-tcpip
// channel.
type tunnelConn struct {
	ssh.Channel
	c    *conn
	addr string

	closeOnce sync.Once
	closed    atomic.Bool // by Close: its own errors are no loss
	expired   atomic.Bool // closed by a deadline
	mu        sync.Mutex
	timers    [2]*time.Timer // the read and the write deadline's
}

func (t *tunnelConn) Read(b []byte) (int, error) {
	n, err := t.Channel.Read(b)
	if err != nil {
		err = t.lost(err)
	}
	return n, err
}

func (t *tunnelConn) Write(b []byte) (int, error) {
	n, err := t.Channel.Write(b)
	if err != nil {
		err = t.lost(err)
	}
	return n, err
}

// SetDeadline, SetReadDeadline and SetWriteDeadline close the tunnel
// when the deadline passes: a channel cannot time out a Read or Write
// that waits, and what sets a deadline on such a connection (TLS's
// close_notify, while closing it) gives it up then. Read and Write then
// fail with os.ErrDeadlineExceeded. A zero time clears the deadline.
func (t *tunnelConn) SetDeadline(d time.Time) error {
	t.setDeadline(0, d)
	t.setDeadline(1, d)
	return nil
}
func (t *tunnelConn) SetReadDeadline(d time.Time) error  { t.setDeadline(0, d); return nil }
func (t *tunnelConn) SetWriteDeadline(d time.Time) error { t.setDeadline(1, d); return nil }

func (t *tunnelConn) setDeadline(i int, d time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timers[i] != nil {
		t.timers[i].Stop()
		t.timers[i] = nil
	}
	if !d.IsZero() {
		t.timers[i] = time.AfterFunc(time.Until(d), func() {
			t.expired.Store(true)
			t.Channel.Close()
		})
	}
}

// Close closes the channel and gives back its use of the connection.
func (t *tunnelConn) Close() error {
	var err error
	t.closeOnce.Do(func() {
		t.closed.Store(true)
		t.SetDeadline(time.Time{})
		err = t.Channel.Close()
		t.c.mu.Lock()
		t.c.tunnels--
		t.c.lastUsed = time.Now()
		t.c.mu.Unlock()
	})
	return err
}

// lost turns err, an error of the channel, into a *ConnLostError when
// the SSH connection under it is gone. A channel reads io.EOF both when
// the far side closed the TCP connection and when x/crypto drops every
// channel of a connection that broke, before the pool learns of it; a
// keepalive answered tells the two apart, on the connection's own
// order of events. A connection that does not answer within the
// keepalive interval is closed.
func (t *tunnelConn) lost(err error) error {
	if t.expired.Load() {
		return os.ErrDeadlineExceeded
	}
	if t.closed.Load() {
		return err
	}
	c := t.c
	if c.alive() {
		wedged := time.AfterFunc(c.target.keepalive(), func() {
			c.close(fmt.Errorf("no keepalive reply within %v", c.target.keepalive()))
		})
		_, _, kerr := c.client.SendRequest("keepalive@openssh.com", true, nil)
		wedged.Stop()
		if kerr == nil {
			return err
		}
		c.close(fmt.Errorf("keepalive: %w", kerr))
	}
	<-c.done
	return &ConnLostError{Target: c.target.Name, Addr: t.addr, Err: c.err}
}

// LocalAddr and RemoteAddr describe the ends of the tunnel as the server
// sees them: its own, and the address asked for.
func (t *tunnelConn) LocalAddr() net.Addr  { return tunnelAddr("ssh:" + t.c.target.Name) }
func (t *tunnelConn) RemoteAddr() net.Addr { return tunnelAddr(t.addr) }

type tunnelAddr string

func (a tunnelAddr) Network() string { return "ssh-direct-tcpip" }
func (a tunnelAddr) String() string  { return string(a) }

// clipText keeps a server's text printable and short.
func clipText(s string, n int) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "..."
	}
	return s
}
