package auditexport

import (
	"context"
	"crypto/tls"
	"net"
	"time"
)

// How long a connection may take to open, and one write to complete: a
// receiver that stops reading for writeTimeout is given up and
// reconnected, its records sent again.
const (
	dialTimeout  = 10 * time.Second
	writeTimeout = 30 * time.Second
)

// conn is one connection to the receiver. A goroutine reads from it to
// learn at once when the receiver closes it: a syslog receiver never
// writes, so a read returns only at the connection's end, while a write
// into a closed connection would seem to succeed once.
type conn struct {
	nc   net.Conn
	tcp  *net.TCPConn  // nc, or the connection under its TLS
	dead chan struct{} // closed when the reader saw the connection end
	done chan struct{} // closed when the reader returned
	err  error         // why it ended; set before dead is closed
}

// dialNet connects to addr, with the TLS handshake when tlsConfig is set.
func dialNet(ctx context.Context, addr string, tlsConfig *tls.Config) (net.Conn, error) {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	if tlsConfig != nil {
		return (&tls.Dialer{NetDialer: d, Config: tlsConfig}).DialContext(ctx, "tcp", addr)
	}
	return d.DialContext(ctx, "tcp", addr)
}

// Probe connects to the receiver at addr as the exporter would (over TLS
// with tlsConfig, the certificate verified), sends nothing and closes the
// connection: what actiongw check does.
func Probe(ctx context.Context, addr string, tlsConfig *tls.Config) error {
	nc, err := dialNet(ctx, addr, tlsConfig)
	if err != nil {
		return err
	}
	return nc.Close()
}

// dial opens a connection to addr, over TLS with tlsConfig if it is set.
func dial(ctx context.Context, addr string, tlsConfig *tls.Config) (*conn, error) {
	nc, err := dialNet(ctx, addr, tlsConfig)
	if err != nil {
		return nil, err
	}
	c := &conn{nc: nc, dead: make(chan struct{}), done: make(chan struct{})}
	if tc, ok := nc.(*tls.Conn); ok {
		c.tcp = tc.NetConn().(*net.TCPConn)
	} else {
		c.tcp = nc.(*net.TCPConn)
	}
	go c.read()
	return c, nil
}

func (c *conn) read() {
	defer close(c.done)
	buf := make([]byte, 512)
	for {
		if _, err := c.nc.Read(buf); err != nil {
			c.err = err
			close(c.dead)
			return
		}
	}
}

// write writes b, giving up at writeTimeout or when ctx ends.
func (c *conn) write(ctx context.Context, b []byte) error {
	c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	stop := context.AfterFunc(ctx, func() { c.nc.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	_, err := c.nc.Write(b)
	return err
}

// closeWrite ends what is written: with TLS a close_notify (RFC 5425,
// section 4.4), then TCP's FIN. A receiver answers by closing its side
// once it has read everything before them, which the reader sees as
// io.EOF. When ctx ends first the socket is closed under it: TLS gives
// the close_notify 5 s of its own, which would outlive ctx.
func (c *conn) closeWrite(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { c.tcp.Close() })
	defer stop()
	if tc, ok := c.nc.(*tls.Conn); ok {
		if err := tc.CloseWrite(); err != nil {
			return err
		}
	}
	return c.tcp.CloseWrite()
}

// close closes the socket, under whatever waits on it, and waits for the
// reader. It writes nothing: a close_notify, if one is due, is
// closeWrite's.
func (c *conn) close() {
	c.tcp.Close()
	<-c.done
}
