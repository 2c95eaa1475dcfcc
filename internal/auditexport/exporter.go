package auditexport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures an Exporter.
type Config struct {
	// Addr is the receiver's host:port.
	Addr string
	// TLS, if set, makes every connection TLS with it (RFC 5425); nil
	// sends over plain TCP.
	TLS *tls.Config
	// QueueBytes bounds the lines waiting to be sent; a line that does not
	// fit is dropped. It must be positive.
	QueueBytes int
	// Hostname is every message's HOSTNAME; empty is os.Hostname.
	Hostname string
	// Logger receives connects, breaks and drops, a few lines a minute at
	// most; nil discards them.
	Logger *slog.Logger
	// MinBackoff and MaxBackoff bound the wait before an attempt to
	// connect after a failed one: it doubles from MinBackoff up to
	// MaxBackoff, jittered by up to half. Zero is 100 ms and 30 s.
	MinBackoff, MaxBackoff time.Duration

	// windowBytes bounds the window, for the tests; zero is
	// defaultWindowBytes.
	windowBytes int
}

// Bounds of what is written at once, and of the window: the records
// last written, which are sent again after a reconnect. What a broken
// connection can lose unseen is what was written to it and never read
// by the receiver: what sat in the socket buffers of both ends, at most
// 4 MiB and 6 MiB by Linux's defaults (tcp_wmem, tcp_rmem), and what the
// receiver had read but not yet stored. The window covers more than the
// buffers, in frames; it holds about half as much in lines.
const (
	batchRecords       = 256
	batchBytes         = 256 << 10
	defaultWindowBytes = 16 << 20
	// stableAfter is how long a connection must have lasted for its end
	// to start the backoff over.
	stableAfter = 10 * time.Second
)

// reportEvery is how often at most the same trouble (drops, failures to
// connect) is logged; a variable for the tests.
var reportEvery = 10 * time.Second

// Stats are an Exporter's counters since New, in records.
type Stats struct {
	// Sent were written to a connection (in whole or in part) at least
	// once.
	Sent int64 `json:"sent"`
	// Resent were written again, after a reconnect, because the
	// connection they had been written to broke: the receiver may have
	// them twice.
	Resent int64 `json:"resent"`
	// Dropped did not fit in the queue and were never sent.
	Dropped int64 `json:"dropped"`
	// Lost may not have arrived: when Close gave up they were still
	// queued, or they were in the window (written last, to a connection
	// that broke or was still open) and the receiver had not confirmed
	// reading them. Close confirms by closing the writing side and
	// waiting for the receiver to close its own, which a receiver does
	// once it has read everything. A line sent after Close is lost too.
	Lost int64 `json:"lost"`
	// Queued are waiting to be written now.
	Queued int `json:"queued"`
	// Connected says whether a connection is open now.
	Connected bool `json:"connected"`
	// Reconnects counts connections opened after the first.
	Reconnects int64 `json:"reconnects"`
	// LastError is the last failure to connect or to write, "" before
	// any. It names the receiver's address, never a record.
	LastError string `json:"last_error,omitempty"`
}

// Exporter sends record lines to a syslog receiver. Send never blocks;
// Close flushes what is queued. It is safe for concurrent use.
type Exporter struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context // ends the goroutine when Close gives up
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when the goroutine returned
	wake   chan struct{} // a line queued, or Close called

	mu      sync.Mutex
	queue   [][]byte
	qbytes  int
	closing bool // Close was called: send what is queued, then stop
	stopped bool // the goroutine returned: a line sent now is lost

	// stopErr says what the goroutine could not deliver, nil if nothing;
	// set before done is closed.
	stopErr error
	// startErr is why an Exporter of NotStarted has no goroutine.
	startErr error

	sent, resent, dropped, lost, reconnects atomic.Int64
	connected                               atomic.Bool
	lastErr                                 atomic.Pointer[string]
	closeOnce                               sync.Once
}

// New starts an Exporter that connects to cfg.Addr at once, and again
// whenever the connection breaks, until Close. It fails only on a Config
// that cannot work.
func New(cfg Config) (*Exporter, error) {
	switch {
	case cfg.Addr == "":
		return nil, errors.New("audit export: no receiver address")
	case cfg.QueueBytes <= 0:
		return nil, fmt.Errorf("audit export: queue of %d bytes", cfg.QueueBytes)
	}
	if cfg.Hostname == "" {
		cfg.Hostname, _ = os.Hostname()
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	if cfg.windowBytes <= 0 {
		cfg.windowBytes = defaultWindowBytes
	}
	e := &Exporter{cfg: cfg, log: cfg.Logger, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	e.log = e.log.With("receiver", cfg.Addr)
	e.ctx, e.cancel = context.WithCancelCause(context.Background())
	s := &sender{Exporter: e, enc: newEncoder(cfg.Hostname, os.Getpid())}
	go s.run()
	return e, nil
}

// NotStarted returns an Exporter for an export that is configured but
// could not start, err saying why, to the receiver addr: it never
// connects, every line sent to it is lost, and its Stats say so (not
// connected, LastError from err), so that the missing copy shows where
// the counters are read.
func NotStarted(addr string, err error) *Exporter {
	e := &Exporter{cfg: Config{Addr: addr}, log: slog.New(slog.DiscardHandler), done: make(chan struct{}),
		wake: make(chan struct{}, 1), stopped: true, startErr: err}
	e.ctx, e.cancel = context.WithCancelCause(context.Background())
	close(e.done)
	msg := "the export could not start: " + err.Error()
	e.lastErr.Store(&msg)
	return e
}

// Send queues a copy of line, one record of the audit log as written
// there, and returns at once. A line that does not fit in the queue is
// dropped and counted; one sent after Close is lost.
func (e *Exporter) Send(line []byte) {
	e.mu.Lock()
	switch {
	case e.stopped:
		e.mu.Unlock()
		e.lost.Add(1)
		return
	case e.qbytes+len(line) > e.cfg.QueueBytes:
		e.mu.Unlock()
		e.dropped.Add(1)
	default:
		e.queue = append(e.queue, append([]byte(nil), line...))
		e.qbytes += len(line)
		e.mu.Unlock()
	}
	e.notify()
}

func (e *Exporter) notify() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Stats returns the counters now.
func (e *Exporter) Stats() Stats {
	e.mu.Lock()
	queued := len(e.queue)
	e.mu.Unlock()
	st := Stats{Sent: e.sent.Load(), Resent: e.resent.Load(), Dropped: e.dropped.Load(), Lost: e.lost.Load(),
		Queued: queued, Connected: e.connected.Load(), Reconnects: e.reconnects.Load()}
	if p := e.lastErr.Load(); p != nil {
		st.LastError = *p
	}
	return st
}

// Close sends what is queued, and what must be sent again, then closes
// the connection's writing side and waits for the receiver to close its
// own, which says it read every record. When ctx ends first it stops the
// goroutine, waits for it (a moment: every wait of the goroutine ends
// with ctx), and counts what was not sent, or not confirmed, as lost. It
// returns an error that says how many records were lost, if any were.
func (e *Exporter) Close(ctx context.Context) error {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		e.closing = true
		e.mu.Unlock()
		e.notify()
	})
	select {
	case <-e.done:
	case <-ctx.Done():
		e.cancel(fmt.Errorf("closing: %w", context.Cause(ctx)))
		<-e.done
	}
	e.cancel(errors.New("closed"))
	if n := e.lost.Load(); e.startErr != nil && n > 0 {
		return fmt.Errorf("audit export to %s: %d records not sent, the export could not start (%w); the local audit log has them", e.cfg.Addr, n, e.startErr)
	}
	return e.stopErr
}

// written is a line of the window and the size of its frame.
type written struct {
	line  []byte
	frame int
}

// sender is the goroutine's own state.
type sender struct {
	*Exporter
	enc  *encoder
	c    *conn // nil while not connected
	buf  []byte
	take [][]byte
	// window are the lines last written, oldest first, and wbytes the
	// size of their frames; resend is set when they must be written again
	// before anything else. The lines written before the window are taken
	// to have arrived: the window holds more than the sockets' buffers.
	window   []written
	wbytes   int
	resend   bool
	failures int       // attempts to connect that failed since the last stable connection
	since    time.Time // when the connection opened
	ever     bool      // a connection was ever opened
	// lastDrops and dropsAt are the drops last logged, and when.
	lastDrops int64
	dropsAt   time.Time
	failAt    time.Time // when a failure to connect was last logged
}

func (s *sender) run() {
	defer close(s.done)
	defer s.stop()
	for {
		if s.c == nil {
			if s.finished() {
				return
			}
			if !s.connect() {
				return
			}
			if s.resend {
				if !s.writeWindow() {
					continue
				}
				s.resend = false
			}
		}
		lines, finish := s.next()
		switch {
		case finish:
			if s.ctx.Err() != nil || s.confirm() {
				return
			}
			continue // it broke first: the window again, on the next
		case lines == nil: // the connection ended
			s.broke(s.c.err)
			continue
		}
		s.writeLines(lines)
	}
}

// stop ends the goroutine's work: the connection closed, what is left
// (the queue, and the window unless the receiver confirmed it) counted
// as lost, and Send told.
func (s *sender) stop() {
	if s.c != nil {
		s.c.close()
		s.connected.Store(false)
	}
	s.mu.Lock()
	s.stopped = true
	queued := len(s.queue)
	s.queue, s.qbytes = nil, 0
	s.mu.Unlock()
	unconfirmed := len(s.window)
	s.lost.Add(int64(queued + unconfirmed))
	s.reportDrops(true)
	if queued+unconfirmed > 0 {
		s.stopErr = fmt.Errorf("audit export to %s: %d records may not have arrived (%d never written, %d written but not confirmed read by the receiver); the local audit log has them",
			s.cfg.Addr, queued+unconfirmed, queued, unconfirmed)
		s.log.Warn("audit export: records may not have reached the receiver at shutdown; the local audit log has them",
			"never_written", queued, "unconfirmed", unconfirmed)
	}
}

// confirm closes the connection's writing side, after the last record,
// and waits for the receiver to close its own: a receiver closes only
// once it has read everything (rsyslog does within a millisecond). Then
// the window has arrived. It returns false when the connection broke
// instead, its window to be sent again on the next; true when the
// receiver confirmed, or when Close gave up first and the window is
// left for stop to count.
func (s *sender) confirm() bool {
	if len(s.window) == 0 {
		return true // nothing written
	}
	err := s.c.closeWrite(s.ctx)
	if err == nil {
		select {
		case <-s.c.dead:
			err = s.c.err
		case <-s.ctx.Done():
		}
	}
	switch {
	case errors.Is(err, io.EOF):
	case s.ctx.Err() != nil:
		s.setErr(fmt.Errorf("the receiver did not confirm reading the last %d records before %w", len(s.window), context.Cause(s.ctx)))
		return true
	default:
		s.broke(err)
		return false
	}
	s.c.close()
	s.c = nil
	s.connected.Store(false)
	s.window, s.wbytes = nil, 0
	return true
}

// finished reports whether Close was called and nothing is left to write.
func (s *sender) finished() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing && len(s.queue) == 0 && !s.resend
}

// connect opens a connection, waiting between attempts; false means the
// goroutine must end (Close gave up, or there is nothing left to send).
func (s *sender) connect() bool {
	for {
		if s.failures > 0 && !s.backoff() {
			return false
		}
		c, err := dial(s.ctx, s.cfg.Addr, s.cfg.TLS)
		if err != nil {
			if s.ctx.Err() != nil {
				return false
			}
			s.failures++
			s.setErr(err)
			if time.Since(s.failAt) >= reportEvery {
				s.log.Warn("audit export: cannot connect to the syslog receiver; records wait in the queue", "error", err, "attempts", s.failures)
				s.failAt = time.Now()
			}
			continue
		}
		s.c, s.since = c, time.Now()
		s.connected.Store(true)
		if s.ever {
			s.reconnects.Add(1)
		}
		s.ever = true
		s.log.Info("audit export: connected to the syslog receiver", "tls", s.cfg.TLS != nil, "resending", s.resendCount())
		return true
	}
}

func (s *sender) resendCount() int {
	if s.resend {
		return len(s.window)
	}
	return 0
}

// backoff waits before the next attempt to connect: false if the
// goroutine must end instead.
func (s *sender) backoff() bool {
	t := time.NewTimer(backoffDelay(s.failures, s.cfg.MinBackoff, s.cfg.MaxBackoff))
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return true
		case <-s.ctx.Done():
			return false
		case <-s.wake:
			s.reportDrops(false)
			if s.finished() {
				return false
			}
		}
	}
}

// backoffDelay is the wait after n failures: lo doubled n-1 times, at
// most hi, less a random part of up to half, so that many servers that
// lost one receiver do not all come back at once.
func backoffDelay(n int, lo, hi time.Duration) time.Duration {
	d := lo << min(n-1, 30)
	if d <= 0 || d > hi {
		d = hi
	}
	return d - rand.N(d/2+1)
}

// broke closes the connection after it ended, or failed, with err: the
// window is sent again on the next one.
func (s *sender) broke(err error) {
	s.c.close()
	s.c = nil
	s.connected.Store(false)
	if s.ctx.Err() != nil {
		err = context.Cause(s.ctx)
	}
	s.setErr(err)
	// The next attempt is at once after a connection that lasted, and
	// waits after one that did not: a receiver that closes every
	// connection at once is not hammered.
	if time.Since(s.since) >= stableAfter {
		s.failures = 0
	} else {
		s.failures++
	}
	s.resend = len(s.window) > 0
	s.log.Warn("audit export: the connection to the syslog receiver ended; reconnecting", "error", err, "to_resend", len(s.window))
}

func (s *sender) setErr(err error) {
	if err == nil {
		return
	}
	msg := err.Error()
	s.lastErr.Store(&msg)
}

// next takes lines from the queue, waiting for some; nil when the
// connection ended first, finish when the goroutine is to end.
func (s *sender) next() (lines [][]byte, finish bool) {
	for {
		s.reportDrops(false)
		// Before writing, and before confirming at Close: records written
		// into a connection the receiver closed would be read by no one.
		select {
		case <-s.c.dead:
			return nil, false
		default:
		}
		s.mu.Lock()
		if len(s.queue) > 0 {
			n, size := 0, 0
			for n < len(s.queue) && n < batchRecords && (n == 0 || size+len(s.queue[n]) <= batchBytes) {
				size += len(s.queue[n])
				n++
			}
			s.take = append(s.take[:0], s.queue[:n]...)
			clear(s.queue[:n])
			s.queue = s.queue[n:]
			s.qbytes -= size
			s.mu.Unlock()
			return s.take, false
		}
		closing := s.closing
		s.mu.Unlock()
		if closing {
			return nil, true
		}
		select {
		case <-s.wake:
		case <-s.c.dead:
			return nil, false
		case <-s.ctx.Done():
			return nil, true
		}
	}
}

// writeLines writes lines, first adding them to the window, so that they
// are sent again if the connection breaks.
func (s *sender) writeLines(lines [][]byte) {
	s.buf = s.buf[:0]
	for _, line := range lines {
		n := len(s.buf)
		s.buf = s.enc.frame(s.buf, line, false)
		s.remember(written{line, len(s.buf) - n})
	}
	s.sent.Add(int64(len(lines)))
	if err := s.c.write(s.ctx, s.buf); err != nil {
		s.broke(err)
	}
}

// remember adds w to the window, forgetting the oldest beyond its bound.
func (s *sender) remember(w written) {
	s.window = append(s.window, w)
	s.wbytes += w.frame
	for s.wbytes > s.cfg.windowBytes {
		s.wbytes -= s.window[0].frame
		s.window[0] = written{}
		s.window = s.window[1:]
	}
}

// writeWindow writes the window again, each record marked as resent; on
// failure the connection is closed and false returned.
func (s *sender) writeWindow() bool {
	for i := 0; i < len(s.window); {
		s.buf = s.buf[:0]
		n := 0
		for ; i < len(s.window) && (n == 0 || len(s.buf) < batchBytes); i++ {
			s.buf = s.enc.frame(s.buf, s.window[i].line, true)
			n++
		}
		s.resent.Add(int64(n))
		if err := s.c.write(s.ctx, s.buf); err != nil {
			s.broke(err)
			return false
		}
	}
	return true
}

// reportDrops logs the records dropped since the last report, at most
// every reportEvery unless final.
func (s *sender) reportDrops(final bool) {
	n := s.dropped.Load()
	if n == s.lastDrops || (!final && time.Since(s.dropsAt) < reportEvery) {
		return
	}
	s.log.Warn("audit export: the queue is full; records were dropped, not sent (the local audit log has them)",
		"dropped", n-s.lastDrops, "dropped_total", n)
	s.lastDrops, s.dropsAt = n, time.Now()
}
