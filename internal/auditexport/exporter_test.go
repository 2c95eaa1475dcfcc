package auditexport

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/rsyslogtest"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/internal/testkit/tlstest"
)

// receiver is a syslog receiver in the test process, for the mechanics
// of the Exporter (rsyslog_test.go has the real one): it parses the
// frames of each connection it accepts, or, with stall, reads nothing.
type receiver struct {
	t      *testing.T
	l      net.Listener
	opts   receiverOptions
	client *tls.Config // with TLS, what trusts the receiver
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  []net.Conn
	got    [][]*rsyslogtest.Message // by connection
	closed bool                     // the test ended: no more connections
}

type receiverOptions struct {
	stall      bool // accept, with TLS complete the handshake, read nothing
	stallFirst bool // stall on the first connection only
	tls        bool // TLS with a certificate for 127.0.0.1 from a CA of the test's
}

func startReceiver(t *testing.T, opts receiverOptions) *receiver {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{t: t, l: l, opts: opts}
	if opts.tls {
		ca := tlstest.NewCA(t, "receiver CA")
		pair, err := tls.X509KeyPair(ca.ServerCert(t))
		if err != nil {
			t.Fatal(err)
		}
		r.l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{pair}})
		r.client = &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}
	}
	r.wg.Go(r.accept)
	t.Cleanup(func() {
		r.l.Close()
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		r.dropConns()
		r.wg.Wait()
	})
	return r
}

func (r *receiver) addr() string { return r.l.Addr().String() }

func (r *receiver) accept() {
	for {
		c, err := r.l.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			c.Close()
			return
		}
		r.conns = append(r.conns, c)
		r.got = append(r.got, nil)
		i := len(r.got) - 1
		r.mu.Unlock()
		r.wg.Go(func() {
			if tc, ok := c.(*tls.Conn); ok && tc.Handshake() != nil {
				return
			}
			if !r.opts.stall && !(r.opts.stallFirst && i == 0) {
				r.read(c, i)
			}
		})
	}
}

// read reads the frames of c until it ends, then closes c, as rsyslogd
// does: a sender that closed its writing side sees that everything it
// wrote was read.
func (r *receiver) read(c net.Conn, i int) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		n, err := br.ReadString(' ')
		if err != nil {
			return
		}
		size, err := strconv.Atoi(strings.TrimSuffix(n, " "))
		if err != nil {
			r.t.Errorf("a frame begins %q", n)
			return
		}
		msg := make([]byte, size)
		if _, err := io.ReadFull(br, msg); err != nil {
			return
		}
		m, err := rsyslogtest.Parse(msg)
		if err != nil {
			r.t.Errorf("%v: %q", err, msg)
			return
		}
		r.mu.Lock()
		r.got[i] = append(r.got[i], m)
		r.mu.Unlock()
	}
}

// dropConns closes every connection accepted so far, from this side.
func (r *receiver) dropConns() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
}

// received returns the messages of each connection so far.
func (r *receiver) received() [][]*rsyslogtest.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([][]*rsyslogtest.Message, len(r.got))
	for i, ms := range r.got {
		out[i] = append([]*rsyslogtest.Message(nil), ms...)
	}
	return out
}

func count(conns [][]*rsyslogtest.Message) int {
	n := 0
	for _, ms := range conns {
		n += len(ms)
	}
	return n
}

// line is a record line with sequence number seq, padded to size bytes
// (or as short as it can be).
func line(seq int, size int) []byte {
	short := fmt.Sprintf(`{"seq":%d,"kind":"intent","command":""}`, seq)
	return fmt.Appendf(nil, `{"seq":%d,"kind":"intent","command":"%s"}`, seq, strings.Repeat("x", max(size-len(short), 0)))
}

func seqOf(t testing.TB, m *rsyslogtest.Message) int {
	t.Helper()
	v, _ := m.Param(sdID, "seq")
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("a message without a seq: %+v", m)
	}
	return n
}

func newExporter(t *testing.T, cfg Config) *Exporter {
	t.Helper()
	if cfg.QueueBytes == 0 {
		cfg.QueueBytes = 16 << 20
	}
	cfg.MinBackoff, cfg.MaxBackoff = 5*time.Millisecond, 50*time.Millisecond
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		e.Close(ctx)
	})
	return e
}

func closeWithin(t *testing.T, e *Exporter, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var err error
	testenv.Returns(t, d+30*time.Second, "Close", func() { err = e.Close(ctx) })
	return err
}

// TestExporterInOrder: every record arrives, once, in order, on one
// connection, and Close flushes the queue.
func TestExporterInOrder(t *testing.T) {
	r := startReceiver(t, receiverOptions{})
	e := newExporter(t, Config{Addr: r.addr()})
	const n = 3000
	for i := 1; i <= n; i++ {
		e.Send(line(i, 300))
	}
	if err := closeWithin(t, e, time.Minute); err != nil {
		t.Fatal(err)
	}
	st := e.Stats()
	if st.Sent != n || st.Dropped != 0 || st.Lost != 0 || st.Queued != 0 || st.Connected || st.Reconnects != 0 {
		t.Errorf("stats %+v; want %d sent, nothing else, closed", st, n)
	}
	testenv.WaitFor(t, 30*time.Second, "every record", func() bool { return count(r.received()) == n })
	got := r.received()
	if len(got) != 1 {
		t.Fatalf("%d connections; want 1", len(got))
	}
	for i, m := range got[0] {
		if seq := seqOf(t, m); seq != i+1 {
			t.Fatalf("message %d has seq %d", i, seq)
		}
	}
}

// TestExporterResends: when the receiver closes the connection, the
// Exporter reconnects and sends the window again, marked, before the
// records that follow.
func TestExporterResends(t *testing.T) {
	r := startReceiver(t, receiverOptions{})
	e := newExporter(t, Config{Addr: r.addr()})
	for i := 1; i <= 100; i++ {
		e.Send(line(i, 200))
	}
	testenv.WaitFor(t, 30*time.Second, "100 records", func() bool { return count(r.received()) == 100 })
	r.dropConns()
	testenv.WaitFor(t, 30*time.Second, "a second connection with the window sent again", func() bool {
		got := r.received()
		return len(got) == 2 && len(got[1]) == 100
	})
	for i := 101; i <= 150; i++ {
		e.Send(line(i, 200))
	}
	if err := closeWithin(t, e, time.Minute); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, "every record", func() bool { return count(r.received()) == 250 })
	second := r.received()[1]
	for i, m := range second {
		_, resent := m.Element(resentID)
		if seq := seqOf(t, m); seq != i+1 || resent != (i < 100) {
			t.Errorf("message %d of the second connection: seq %d, resent %v; want %d, %v", i, seq, resent, i+1, i < 100)
		}
	}
	if st := e.Stats(); st.Sent != 150 || st.Resent != 100 || st.Reconnects != 1 || st.Lost != 0 || st.LastError == "" {
		t.Errorf("stats %+v; want 150 sent, 100 resent, 1 reconnect, the break's error", st)
	}
}

// TestExporterDrops: with no receiver, Send still returns at once; what
// does not fit in the queue is dropped, counted, and logged in a line or
// two, not one per record; Close gives up on the rest and counts it lost.
func TestExporterDrops(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	var logs syncbuf.Buffer
	e := newExporter(t, Config{Addr: addr, QueueBytes: 10 * len(line(1, 100)), Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	for i := 1; i <= 100; i++ {
		e.Send(line(i, 100))
	}
	if st := e.Stats(); st.Dropped != 90 || st.Queued != 10 || st.Sent != 0 {
		t.Errorf("stats %+v; want 90 dropped, 10 queued", st)
	}
	testenv.WaitFor(t, 30*time.Second, "a failure to connect", func() bool { return e.Stats().LastError != "" })
	err = closeWithin(t, e, 0)
	if err == nil || !strings.Contains(err.Error(), "10 records") {
		t.Errorf("Close: %v; want 10 records lost", err)
	}
	st := e.Stats()
	if st.Lost != 10 || !strings.Contains(st.LastError, "connection refused") {
		t.Errorf("stats %+v; want 10 lost and the refusal", st)
	}
	dropped, lines := 0, 0
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec struct {
			Msg     string
			Dropped int
		}
		json.Unmarshal([]byte(l), &rec)
		if strings.Contains(rec.Msg, "dropped") {
			dropped += rec.Dropped
			lines++
		}
	}
	if dropped != 90 || lines > 2 {
		t.Errorf("%d log lines say %d records were dropped; want 90 in at most 2\n%s", lines, dropped, logs.String())
	}
	e.Send(line(101, 100))
	if st := e.Stats(); st.Lost != 11 {
		t.Errorf("a record sent after Close: %d lost; want 11", st.Lost)
	}
}

// TestExporterCloseGivesUp: a receiver that stops reading blocks the
// writes; Close's deadline ends them, the goroutine returns, and what
// may not have arrived is counted.
func TestExporterCloseGivesUp(t *testing.T) {
	r := startReceiver(t, receiverOptions{stall: true})
	e := newExporter(t, Config{Addr: r.addr(), QueueBytes: 64 << 20})
	for i := 1; i <= 800; i++ { // 48 MB, more than the sockets' buffers hold
		e.Send(line(i, 60_000))
	}
	testenv.WaitFor(t, 30*time.Second, "a blocked write", func() bool {
		st := e.Stats()
		return st.Sent > 0 && st.Queued > 0
	})
	err := closeWithin(t, e, 200*time.Millisecond)
	st := e.Stats()
	if err == nil || st.Lost == 0 || st.Sent+st.Lost < 800 {
		t.Errorf("Close: %v, stats %+v; want records counted lost, and every record sent or lost", err, st)
	}
	if !errors.Is(e.ctx.Err(), context.Canceled) {
		t.Errorf("the goroutine's context: %v; want it cancelled", e.ctx.Err())
	}
}

// TestExporterCloseUnreadIsLost: records written into the socket but not
// yet read by the receiver when serve ends are not known to have
// arrived. A receiver that restarts then (a host shutting down stops
// both) drops them unseen, so Close must either see the receiver read
// them (half-close, wait for its EOF) or count them lost.
func TestExporterCloseUnreadIsLost(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "tcp", true: "tls"}[useTLS], func(t *testing.T) {
			r := startReceiver(t, receiverOptions{stall: true, tls: useTLS}) // accepts, reads nothing
			e := newExporter(t, Config{Addr: r.addr(), TLS: r.client})
			const n = 10
			for i := 1; i <= n; i++ {
				e.Send(line(i, 300))
			}
			testenv.WaitFor(t, 30*time.Second, "every record written", func() bool { return e.Stats().Sent == n })
			err := closeWithin(t, e, time.Second)
			st := e.Stats()
			if arrived := count(r.received()); int64(arrived)+st.Lost != n || err == nil || !strings.Contains(err.Error(), "10 written but not confirmed") {
				t.Errorf("Close = %v, stats %+v, %d read by the receiver; want arrived + lost = %d and an error saying so", err, st, arrived, n)
			}
			if !strings.Contains(st.LastError, "did not confirm") {
				t.Errorf("last error %q; want it to say the receiver did not confirm", st.LastError)
			}
		})
	}
}

// TestExporterCloseConfirmed: a receiver that reads everything, and
// closes its side when the Exporter closes its writing side, confirms
// every record: Close returns nil, nothing lost.
func TestExporterCloseConfirmed(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "tcp", true: "tls"}[useTLS], func(t *testing.T) {
			r := startReceiver(t, receiverOptions{tls: useTLS})
			e := newExporter(t, Config{Addr: r.addr(), TLS: r.client})
			const n = 500
			for i := 1; i <= n; i++ {
				e.Send(line(i, 300))
			}
			// Close without waiting: the records still queued are written
			// first, then confirmed.
			if err := closeWithin(t, e, time.Minute); err != nil {
				t.Fatal(err)
			}
			// Confirmed means read: no wait for the receiver here.
			if got := count(r.received()); got != n {
				t.Errorf("%d records read by the receiver when Close returned; want %d", got, n)
			}
			if st := e.Stats(); st.Sent != n || st.Lost != 0 || st.Connected {
				t.Errorf("stats %+v; want %d sent, none lost, closed", st, n)
			}
		})
	}
}

// TestExporterCloseAfterBreak: the receiver drops the connection with the
// records unread (a restart) as serve ends. Close must notice the break,
// not take it for the end of its flush: it reconnects, writes the window
// again, and has it confirmed.
func TestExporterCloseAfterBreak(t *testing.T) {
	r := startReceiver(t, receiverOptions{stallFirst: true})
	e := newExporter(t, Config{Addr: r.addr()})
	const n = 20
	for i := 1; i <= n; i++ {
		e.Send(line(i, 300))
	}
	testenv.WaitFor(t, 30*time.Second, "every record written", func() bool { return e.Stats().Sent == n })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- e.Close(ctx) }()
	r.dropConns() // unread: a reset
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	got := r.received()
	if len(got) != 2 || len(got[0]) != 0 || len(got[1]) != n {
		var each []int
		for _, ms := range got {
			each = append(each, len(ms))
		}
		t.Fatalf("records read on each connection: %v; want none on the first, %d on the second", each, n)
	}
	for i, m := range got[1] {
		if _, resent := m.Element(resentID); seqOf(t, m) != i+1 || !resent {
			t.Errorf("message %d of the second connection: seq %d, resent %v; want %d, resent", i, seqOf(t, m), resent, i+1)
		}
	}
	if st := e.Stats(); st.Lost != 0 || st.Resent != n || st.Reconnects != 1 {
		t.Errorf("stats %+v; want none lost, %d resent, 1 reconnect", st, n)
	}
}

// TestNotStarted: an export that could not start counts what it was
// sent as lost and says why, in its counters and in Close's error.
func TestNotStarted(t *testing.T) {
	e := NotStarted("siem.example:6514", errors.New("open /x/ca.pem: no such file or directory"))
	for i := 1; i <= 3; i++ {
		e.Send(line(i, 100))
	}
	st := e.Stats()
	if st.Lost != 3 || st.Sent != 0 || st.Connected || !strings.Contains(st.LastError, "could not start: open /x/ca.pem") {
		t.Errorf("stats %+v; want 3 lost, nothing sent, not connected, the reason", st)
	}
	err := closeWithin(t, e, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "3 records not sent") || !strings.Contains(err.Error(), "ca.pem") {
		t.Errorf("Close: %v; want 3 records not sent, and why", err)
	}
}

func TestBackoffDelay(t *testing.T) {
	lo, hi := 100*time.Millisecond, 30*time.Second
	for n := 1; n <= 70; n++ {
		want := min(lo<<min(n-1, 30), hi)
		if got := backoffDelay(n, lo, hi); got < want/2 || got > want {
			t.Errorf("after %d failures: %v; want %v to %v", n, got, want/2, want)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	for _, cfg := range []Config{{QueueBytes: 1}, {Addr: "127.0.0.1:1"}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v): no error", cfg)
		}
	}
}
