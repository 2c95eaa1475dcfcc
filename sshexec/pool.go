package sshexec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// ErrPoolClosed is returned by Run and Check after Close.
var ErrPoolClosed = errors.New("ssh pool closed")

// Pool runs commands on targets over reused connections: one per target
// (and per jump host), with a bounded number of concurrent sessions and a
// keepalive. A connection that dies or stops answering is closed, and the
// next call dials a new one; one unused for five minutes is closed too. A
// Pool is safe for concurrent use.
type Pool struct {
	logger *slog.Logger

	mu     sync.Mutex
	conns  map[string]*entry
	closed bool
	wg     sync.WaitGroup // every goroutine of every connection
}

// entry is a pool slot: the connection, or the dial in progress.
type entry struct {
	ready chan struct{} // closed when the dial finished
	c     *conn
	err   error
	// cancelled is set when the dial ended because the dialer's context
	// ended; waiters then dial themselves instead of sharing the error.
	cancelled bool
}

// NewPool returns an empty pool that logs connection events to logger.
func NewPool(logger *slog.Logger) *Pool {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Pool{logger: logger, conns: map[string]*entry{}}
}

// Close closes every connection, which ends every command still running
// (their Run calls return status failed), and waits for the pool's
// goroutines. It returns ErrPoolClosed when called twice.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrPoolClosed
	}
	p.closed = true
	var conns []*conn
	for _, e := range p.conns {
		select {
		case <-e.ready:
			if e.c != nil {
				conns = append(conns, e.c)
			}
		default: // the dialer sees p.closed and closes its connection itself
		}
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close(ErrPoolClosed)
	}
	p.wg.Wait()
	return nil
}

// Check dials t on a new connection, verifies its host key and logs in,
// then hangs up: what `actiongw check` reports for each target. Host key
// problems are *HostKeyError, refused credentials *AuthError.
func (p *Pool) Check(ctx context.Context, t *Target) error {
	if err := t.validate(); err != nil {
		return err
	}
	client, err := p.dial(ctx, t)
	if err != nil {
		return err
	}
	return client.Close()
}

// conn returns a live connection to t, dialling (once, for all concurrent
// callers) when there is none.
func (p *Pool) conn(ctx context.Context, t *Target) (*conn, error) {
	key := t.poolKey()
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrPoolClosed
		}
		e := p.conns[key]
		if e != nil {
			select {
			case <-e.ready:
				if e.c != nil && e.c.alive() {
					p.mu.Unlock()
					return e.c, nil
				}
				e = nil // dead or failed: dial again
			default:
			}
		}
		if e != nil { // a dial is in progress: wait for it
			p.mu.Unlock()
			select {
			case <-e.ready:
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
			if e.err != nil && !e.cancelled {
				return nil, e.err
			}
			continue
		}
		e = &entry{ready: make(chan struct{})}
		p.conns[key] = e
		p.mu.Unlock()

		client, err := p.dial(ctx, t)
		p.mu.Lock()
		if err == nil && p.closed {
			client.Close()
			err = ErrPoolClosed
		}
		if err != nil {
			e.err, e.cancelled = err, ctx.Err() != nil
			delete(p.conns, key)
		} else {
			e.c = p.newConn(t, client)
		}
		close(e.ready)
		p.mu.Unlock()
		return e.c, err
	}
}

// dial opens a new authenticated connection to t, through its jump host's
// pooled connection when it has one.
func (p *Pool) dial(ctx context.Context, t *Target) (*ssh.Client, error) {
	if t.Jump == nil {
		tcp, err := dialTCP(ctx, t)
		if err != nil {
			return nil, err
		}
		return handshake(ctx, t, tcp)
	}
	jump, err := p.conn(ctx, t.Jump)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("target %q: jump host: %w", t.Name, err)
	}
	tunnel, err := jump.client.DialContext(ctx, "tcp", t.addr())
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, fmt.Errorf("target %q: connect to %s through jump host %q: %w", t.Name, t.addr(), t.Jump.Name, err)
	}
	return handshake(ctx, t, tunnel)
}

// conn is one pooled SSH connection with its session accounting.
type conn struct {
	target *Target
	client *ssh.Client
	logger *slog.Logger
	pool   *Pool

	done      chan struct{} // closed when the connection is closed
	closeOnce sync.Once
	err       error // why it closed; read after done

	mu       sync.Mutex
	limit    int           // sessions the server allows, learned downwards
	active   int           // sessions of Run calls
	freed    chan struct{} // closed and replaced when a session ends
	lastUsed time.Time
}

// idleTimeout is how long an unused connection stays open.
const idleTimeout = 5 * time.Minute

func (p *Pool) newConn(t *Target, client *ssh.Client) *conn {
	c := &conn{
		target: t, client: client, pool: p,
		logger: p.logger.With("target", t.Name),
		done:   make(chan struct{}),
		limit:  t.MaxSessions,
		freed:  make(chan struct{}),

		lastUsed: time.Now(),
	}
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		c.close(client.Wait())
	}()
	go func() {
		defer p.wg.Done()
		c.keepalive()
	}()
	c.logger.Debug("ssh connected", "addr", t.addr())
	return c
}

func (c *conn) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// close closes the connection once, recording why.
func (c *conn) close(why error) {
	c.closeOnce.Do(func() {
		if why == nil {
			why = errors.New("connection closed by the server")
		}
		c.err = why
		close(c.done)
		c.client.Close()
		c.logger.Debug("ssh connection closed", "reason", why.Error())
	})
}

// keepalive sends a keepalive request every interval and closes the
// connection when one fails or gets no reply within the interval, or when
// it has been idle for idleTimeout.
func (c *conn) keepalive() {
	interval := c.target.keepalive()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
		}
		if c.idle() {
			c.close(fmt.Errorf("idle for %v", idleTimeout))
			return
		}
		wedged := time.AfterFunc(interval, func() {
			c.close(fmt.Errorf("no keepalive reply within %v", interval))
		})
		// OpenSSH answers unknown global requests with a failure, which is
		// a reply all the same.
		_, _, err := c.client.SendRequest("keepalive@openssh.com", true, nil)
		wedged.Stop()
		if err != nil {
			c.close(fmt.Errorf("keepalive: %w", err))
			return
		}
	}
}

// runLimit is how many Run sessions may be open at once: one of the
// server's sessions stays free for stopping commands.
func (c *conn) runLimit() int {
	return max(1, c.limit-1)
}

// acquire waits for a session slot.
func (c *conn) acquire(ctx context.Context) error {
	for {
		c.mu.Lock()
		if c.active < c.runLimit() {
			c.active++
			c.mu.Unlock()
			return nil
		}
		freed := c.freed
		c.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-c.done:
			return c.err
		}
	}
}

// idle reports whether no session has used the connection for idleTimeout.
func (c *conn) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active == 0 && time.Since(c.lastUsed) > idleTimeout
}

func (c *conn) release() {
	c.mu.Lock()
	c.active--
	c.lastUsed = time.Now()
	close(c.freed)
	c.freed = make(chan struct{})
	c.mu.Unlock()
}

// refused records that the server refused a session while others were
// open: its real MaxSessions is lower than configured. It reports whether
// waiting for a slot may help.
func (c *conn) refused() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	others := c.active - 1 // the caller's slot is still counted
	if others < 1 {
		return false
	}
	// The server allowed the others plus, possibly, a stop session.
	if others+1 < c.limit {
		c.limit = others + 1
		c.logger.Info("server allows fewer sessions than configured", "max_sessions", c.limit)
	}
	return true
}

// waitFreed waits until another session of this connection ends.
func (c *conn) waitFreed(ctx context.Context) error {
	c.mu.Lock()
	freed := c.freed
	c.mu.Unlock()
	select {
	case <-freed:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-c.done:
		return c.err
	}
}

// openResult is the outcome of opening a session channel.
type openResult struct {
	ch   ssh.Channel
	reqs <-chan *ssh.Request
	err  error
}

// open opens a session channel. It returns when ctx ends, without waiting
// for the server: a goroutine of the connection then closes the channel if
// it opens after all. A server that does not answer within the keepalive
// interval has its connection closed.
func (c *conn) open(ctx context.Context) (ssh.Channel, <-chan *ssh.Request, error) {
	res := make(chan openResult)
	abandon := make(chan struct{})
	// Added under the lock, so that Close never waits while one is added.
	c.pool.mu.Lock()
	if c.pool.closed {
		c.pool.mu.Unlock()
		return nil, nil, ErrPoolClosed
	}
	c.pool.wg.Add(1)
	c.pool.mu.Unlock()
	go func() {
		defer c.pool.wg.Done()
		ch, reqs, err := c.client.OpenChannel("session", nil)
		select {
		case res <- openResult{ch, reqs, err}:
		case <-abandon:
			if err == nil {
				ch.Close()
				ssh.DiscardRequests(reqs)
			}
		}
	}()
	wedged := time.NewTimer(c.target.keepalive())
	defer wedged.Stop()
	select {
	case r := <-res:
		return r.ch, r.reqs, r.err
	case <-ctx.Done():
		close(abandon)
		return nil, nil, context.Cause(ctx)
	case <-wedged.C:
		close(abandon)
		err := fmt.Errorf("no reply to a session request within %v", c.target.keepalive())
		c.close(err)
		return nil, nil, err
	}
}
