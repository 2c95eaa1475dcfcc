package sshexec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// ErrPoolClosed is returned by Run, Acquire and Check after Close.
var ErrPoolClosed = errors.New("ssh pool closed")

// Pool runs commands on targets over reused connections: up to the
// target's MaxConnections each (and one per jump host), with a bounded
// number of concurrent sessions per connection and a keepalive. A second
// connection opens only when every session of the open ones is in use. A
// connection that dies or stops answering is closed, and the next call
// dials a new one; one unused for five minutes is closed too. A Pool is
// safe for concurrent use.
type Pool struct {
	logger *slog.Logger
	// signed, for tests, sees each certificate signed for a CA target.
	signed func(*ssh.Certificate)

	mu      sync.Mutex
	targets map[string]*targetConns
	closed  bool
	wg      sync.WaitGroup // every goroutine of every connection
}

// targetConns are the connections to one target (one pool key), guarded
// by the pool's lock.
type targetConns struct {
	conns []*conn
	dial  *dialing // the dial in progress, if any
	// changed is closed and replaced when a session slot frees, a
	// connection closes or a dial ends: what a waiter for a slot waits on.
	changed chan struct{}
}

// dialing is a dial in progress, which callers that need a connection
// share.
type dialing struct {
	ready chan struct{} // closed when the dial finished
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
	return &Pool{logger: logger, targets: map[string]*targetConns{}}
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
	for _, tc := range p.targets {
		conns = append(conns, tc.conns...)
	}
	p.mu.Unlock()
	// A dial in progress sees p.closed and closes its connection itself.
	for _, c := range conns {
		c.close(ErrPoolClosed)
	}
	p.wg.Wait()
	return nil
}

// Check dials t on a new connection, verifies its host key and logs in,
// then hangs up: what `actiongw check` reports for each target. A CA
// target logs in with a certificate forced to `true`, which must run and
// exit 0: the host trusts the CA, accepts the principal and runs a
// certificate's force-command. Host key problems are *HostKeyError,
// refused credentials *AuthError.
func (p *Pool) Check(ctx context.Context, t *Target) error {
	if err := t.validate(); err != nil {
		return err
	}
	if t.Auth.CA != nil {
		return p.checkCA(ctx, t)
	}
	client, err := p.dial(ctx, t)
	if err != nil {
		return err
	}
	return client.Close()
}

// signalLocked wakes the waiters for a slot of tc; p.mu must be held.
func (tc *targetConns) signalLocked() {
	close(tc.changed)
	tc.changed = make(chan struct{})
}

// targetLocked returns t's connections, pruned of closed ones; p.mu must
// be held.
func (p *Pool) targetLocked(t *Target) *targetConns {
	key := t.poolKey()
	tc := p.targets[key]
	if tc == nil {
		tc = &targetConns{changed: make(chan struct{})}
		p.targets[key] = tc
	}
	tc.conns = slices.DeleteFunc(tc.conns, func(c *conn) bool { return !c.alive() })
	return tc
}

// QueueError is returned by Acquire when no session of the target became
// free within the wait it was given: the command never started.
type QueueError struct {
	Target string
	Waited time.Duration
	// InUse is the sessions of the target's connections in use, and
	// Connections how many connections it has open.
	InUse, Connections int
}

func (e *QueueError) Error() string {
	return fmt.Sprintf("no session of target %q became free within %v (sessions in use: %d; connections: %d)",
		e.Target, e.Waited.Round(time.Millisecond), e.InUse, e.Connections)
}

// connect returns a live connection to t. With slot, it takes one of the
// connection's session slots, dialling another connection (up to
// t.MaxConnections) when every open one is full, and waiting for a slot
// up to wait (then a *QueueError) when none can be dialled; without, any
// live connection will do. Callers that need a new connection share one
// dial.
func (p *Pool) connect(ctx context.Context, t *Target, slot bool, wait time.Duration) (*conn, error) {
	var timeout <-chan time.Time
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrPoolClosed
		}
		tc := p.targetLocked(t)
		for _, c := range tc.conns {
			if !slot || c.tryAcquire() {
				p.mu.Unlock()
				return c, nil
			}
		}
		if d := tc.dial; d != nil {
			p.mu.Unlock()
			select {
			case <-d.ready:
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
			if d.err != nil && !d.cancelled {
				return nil, d.err
			}
			continue
		}
		if len(tc.conns) < t.maxConnections() {
			d := &dialing{ready: make(chan struct{})}
			tc.dial = d
			p.mu.Unlock()
			c, err := p.newConn(ctx, t)
			p.mu.Lock()
			tc.dial = nil
			d.err, d.cancelled = err, err != nil && ctx.Err() != nil
			if err == nil {
				tc.conns = append(tc.conns, c)
			}
			close(d.ready)
			tc.signalLocked()
			p.mu.Unlock()
			if err != nil {
				return nil, err
			}
			continue
		}
		changed := tc.changed
		full := &QueueError{Target: t.Name, Waited: wait, Connections: len(tc.conns)}
		for _, c := range tc.conns {
			full.InUse += c.inUse()
		}
		p.mu.Unlock()
		if timeout == nil {
			timer := time.NewTimer(wait)
			defer timer.Stop()
			timeout = timer.C
		}
		select {
		case <-changed:
		case <-timeout:
			return nil, full
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// conn returns a live connection to t, for control sessions and tunnels,
// which take no session slot.
func (p *Pool) conn(ctx context.Context, t *Target) (*conn, error) {
	return p.connect(ctx, t, false, 0)
}

// newConn dials t and starts the connection's goroutines. A pool closed
// meanwhile closes the new connection at once.
func (p *Pool) newConn(ctx context.Context, t *Target) (*conn, error) {
	client, err := p.dial(ctx, t)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		client.Close()
		return nil, ErrPoolClosed
	}
	return p.startConn(t, client), nil
}

// dial opens a new authenticated connection to t, through a pooled
// connection to its jump host when it has one.
func (p *Pool) dial(ctx context.Context, t *Target) (*ssh.Client, error) {
	return p.dialAs(ctx, t, nil)
}

// dialAs is dial, logging in with cert (a certificate of t's CA) instead
// of t's credentials when it is not nil.
func (p *Pool) dialAs(ctx context.Context, t *Target, cert ssh.Signer) (*ssh.Client, error) {
	ctx, cancel := t.connectContext(ctx)
	defer cancel()
	conn, err := p.transport(ctx, t)
	if err != nil {
		return nil, err
	}
	return handshake(ctx, t, conn, cert)
}

// connectContext is ctx bounded by t's ConnectTimeout, if it has one.
func (t *Target) connectContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if t.ConnectTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, t.ConnectTimeout,
		fmt.Errorf("target %q: connect to %s: no connection within its ConnectTimeout (%v)", t.Name, t.addr(), t.ConnectTimeout))
}

// transport connects to t's SSH port: directly, or through a tunnel of
// the pooled connection to its jump host.
func (p *Pool) transport(ctx context.Context, t *Target) (net.Conn, error) {
	if t.Jump == nil {
		return dialTCP(ctx, t)
	}
	jump, err := p.jumpConn(ctx, t)
	if err != nil {
		return nil, err
	}
	tunnel, err := jump.client.DialContext(ctx, "tcp", t.addr())
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, fmt.Errorf("target %q: connect to %s through jump host %q: %w", t.Name, t.addr(), t.Jump.Name, err)
	}
	return tunnel, nil
}

// jumpConn is the pooled connection to t's jump host.
func (p *Pool) jumpConn(ctx context.Context, t *Target) (*conn, error) {
	jump, err := p.conn(ctx, t.Jump)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("target %q: jump host: %w", t.Name, err)
	}
	return jump, nil
}

// probe is what Acquire does for a CA target before its command is
// known, so that a host key a person may be asked to trust is reported
// before anything starts, as any target's is: it connects to the jump
// host, if any (pooled, as the command's connection will use it), and,
// when t's host key is neither pinned nor recorded in its known_hosts,
// runs the SSH handshake with t up to the host key only (no login) and
// returns the *HostKeyError. A recorded key costs no connection here.
func (p *Pool) probe(ctx context.Context, t *Target) error {
	ctx, cancel := t.connectContext(ctx)
	defer cancel()
	if t.Jump != nil {
		if _, err := p.jumpConn(ctx, t); err != nil {
			return err
		}
	}
	hk, err := newHostKeyCheck(t)
	if err != nil || hk.recorded {
		return err
	}
	conn, err := p.transport(ctx, t)
	if err != nil {
		return err
	}
	return probeHostKey(ctx, t, conn, hk)
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

	tc *targetConns // the pool's list it is on, whose waiters it wakes
	// single marks the connection of one certificate (see certified): on
	// no list, used by one command, closed when it releases its slot.
	single bool

	mu       sync.Mutex
	limit    int // sessions the server allows, learned downwards
	active   int // sessions of Run calls
	tunnels  int // TCP connections open through it (DialTCP)
	lastUsed time.Time
}

// idleTimeout is how long an unused connection stays open.
const idleTimeout = 5 * time.Minute

// startConn starts the goroutines of a new connection; p.mu must be held.
func (p *Pool) startConn(t *Target, client *ssh.Client) *conn {
	c := &conn{
		target: t, client: client, pool: p, tc: p.targetLocked(t),
		logger: p.logger.With("target", t.Name),
		done:   make(chan struct{}),
		limit:  t.MaxSessions,

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
		c.pool.mu.Lock()
		c.tc.signalLocked() // a waiter may dial in its place
		c.pool.mu.Unlock()
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

// tryAcquire takes a session slot if one is free; p.mu is held.
func (c *conn) tryAcquire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.alive() || c.active >= c.runLimit() {
		return false
	}
	c.active++
	return true
}

// inUse is the number of session slots taken.
func (c *conn) inUse() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active
}

// idle reports whether no session has used the connection for idleTimeout.
func (c *conn) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active == 0 && c.tunnels == 0 && time.Since(c.lastUsed) > idleTimeout
}

// release gives back a session slot and wakes the waiters for one.
func (c *conn) release() {
	if c.single {
		c.close(errors.New("its one command ended"))
		return
	}
	c.mu.Lock()
	c.active--
	c.lastUsed = time.Now()
	c.mu.Unlock()
	c.pool.mu.Lock()
	c.tc.signalLocked()
	c.pool.mu.Unlock()
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
	return c.openChannel(ctx, "session", nil)
}

// openChannel is open for a channel of any type, with its type-specific
// data.
func (c *conn) openChannel(ctx context.Context, kind string, data []byte) (ssh.Channel, <-chan *ssh.Request, error) {
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
		ch, reqs, err := c.client.OpenChannel(kind, data)
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
		err := fmt.Errorf("no reply to a %s channel request within %v", kind, c.target.keepalive())
		c.close(err)
		return nil, nil, err
	}
}
