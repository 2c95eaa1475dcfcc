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
	dead chan struct{} // closed when the reader saw the connection end
	done chan struct{} // closed when the reader returned
	err  error         // why it ended; set before dead is closed
}

// dial opens a connection to addr, over TLS with tlsConfig if it is set.
func dial(ctx context.Context, addr string, tlsConfig *tls.Config) (*conn, error) {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	var (
		nc  net.Conn
		err error
	)
	if tlsConfig != nil {
		nc, err = (&tls.Dialer{NetDialer: d, Config: tlsConfig}).DialContext(ctx, "tcp", addr)
	} else {
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	c := &conn{nc: nc, dead: make(chan struct{}), done: make(chan struct{})}
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

// close closes the connection and waits for its reader. clean ends a
// TLS connection with a close_notify, which the receiver must read;
// otherwise (the connection broke, or Close gave up) the socket is closed
// under it, so that nothing waits.
func (c *conn) close(clean bool) {
	if tc, ok := c.nc.(*tls.Conn); ok && !clean {
		tc.NetConn().Close()
	}
	c.nc.Close()
	<-c.done
}
