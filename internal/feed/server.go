package feed

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/actiongw/actiongw/internal/owner"
)

// Source is what a serve's Server shows and acts on: its gateway.
type Source interface {
	// Actions returns the running and recent actions, newest first, their
	// texts redacted.
	Actions() []Action
	// Stop stops a running action as cancel_action does (SSH: the remote
	// command is stopped in stages and verified gone) and returns how it
	// ended; an error says it is unknown, or ctx ended first.
	Stop(ctx context.Context, handle string) (StopResult, error)
	// Recent returns the last output (at most RecentBytes of each stream,
	// redacted) of every running action, for a console that connects
	// while they run; Serve need not be set.
	Recent() []Output
}

// RecentBytes bounds what a console that connects is sent of each
// running stream's output so far: the rest is read_output's.
const RecentBytes = outputWindow

// A connected console's queue holds at most this many frames and bytes
// of frames; an event that does not fit is dropped and counted, and the
// console is told (Event.Missed) and sent a fresh snapshot once it has
// read what was queued. With the frames its writer holds while the
// socket does not take them, a console costs a serve at most twice
// maxQueueBytes, plus a snapshot.
const (
	maxQueueFrames = 1024
	maxQueueBytes  = 1 << 20
)

// Output goes out at most every outputEvery, per stream at most
// outputWindow bytes: the first that arrived since the last time, and the
// last tailWindow. A stream faster than that is sent in pieces with gaps
// (an Output whose Offset is past the end of the last), not queued, and
// the bytes in a gap are not even copied: following a stream costs the
// serve little however fast it comes (BenchmarkMCPSSHDrain).
const (
	outputEvery  = 50 * time.Millisecond
	outputWindow = 8 << 10
	tailWindow   = 2 << 10
)

// Server is one serve's end of the feed: its socket, the consoles
// connected to it, and the questions waiting for an answer from one. Its
// methods never wait on a console.
type Server struct {
	log  *slog.Logger
	src  Source
	ln   *net.UnixListener
	path string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	watched atomic.Int32 // consoles connected

	mu        sync.Mutex
	serve     Serve
	conns     map[*conn]struct{}
	connected uint64 // consoles connected so far: the last one's seq
	questions map[string]*question
	closed    bool

	// outMu guards pending, and orders the output sent with the events
	// of an action's end.
	outMu   sync.Mutex
	pending map[outKey]*pendingOut
	kick    chan struct{}
}

type outKey struct{ handle, stream string }

// pendingOut is a stream's output not sent yet: head, from offset off,
// and, once head is full, the last bytes that came after it: tail, from
// tailOff.
type pendingOut struct {
	off     int64
	head    []byte
	tailOff int64
	tail    []byte
}

// add keeps what it keeps of p, at offset.
func (po *pendingOut) add(offset int64, p []byte) {
	if len(po.tail) == 0 && offset == po.off+int64(len(po.head)) {
		n := min(len(p), outputWindow-tailWindow-len(po.head))
		po.head = append(po.head, p[:n]...)
		p, offset = p[n:], offset+int64(n)
	}
	if len(p) == 0 {
		return
	}
	if len(p) >= tailWindow || po.tailOff+int64(len(po.tail)) != offset {
		cut := max(0, len(p)-tailWindow)
		po.tailOff, po.tail = offset+int64(cut), append(po.tail[:0], p[cut:]...)
		return
	}
	po.tail = append(po.tail, p...)
	if over := len(po.tail) - tailWindow; over > 0 {
		po.tailOff += int64(over)
		po.tail = po.tail[:copy(po.tail, po.tail[over:])]
	}
}

type question struct {
	q      Question
	answer chan Answer // holds the one answer
}

// Listen starts the feed of this process (a serve) over src: a socket in
// stateDir's console folder named by owner.Self, which Close removes.
func Listen(stateDir string, src Source, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The gateway made the state directory, or refused it: nothing is
	// written in one others may write.
	fi, err := os.Stat(stateDir)
	switch {
	case err != nil:
		return nil, fmt.Errorf("console socket: %w", err)
	case runtime.GOOS != "windows" && fi.Mode().Perm()&0o022 != 0:
		return nil, fmt.Errorf("console socket: the state directory %s is writable by other users", stateDir)
	}
	dir := Dir(stateDir)
	if err := privateDir(dir); err != nil {
		return nil, fmt.Errorf("console socket folder: %w", err)
	}
	id := owner.Self()
	path := filepath.Join(dir, string(id)+sockSuffix)
	// A file of this name is a socket of ours that a crash left, or of a
	// process that had our pid and start time: neither listens.
	_ = os.Remove(path)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("console socket: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	// The folder is the user's alone already; the socket is too.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("console socket: %w", err)
	}
	s := &Server{log: log, src: src, ln: ln, path: path,
		serve:     Serve{ID: string(id), PID: os.Getpid(), Started: time.Now().UTC()},
		conns:     map[*conn]struct{}{},
		questions: map[string]*question{},
		pending:   map[outKey]*pendingOut{},
		kick:      make(chan struct{}, 1),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Go(s.accept)
	s.wg.Go(s.pump)
	return s, nil
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Close removes the socket, drops every console, and waits for the
// server's goroutines. Questions still waiting end with ErrClosed.
func (s *Server) Close() error {
	s.cancel()
	err := s.ln.Close()
	s.mu.Lock()
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	s.wg.Wait()
	return err
}

// ErrClosed is what a question still waiting gets when the server closes.
var ErrClosed = errors.New("the console feed closed")

// SetClient records the MCP client's name, and tells the consoles.
func (s *Server) SetClient(name string) {
	s.mu.Lock()
	s.serve.Client = name
	sv := s.serve
	s.mu.Unlock()
	s.publish(Event{Serve: &sv})
}

// Watched reports whether a console is connected: output is worth
// passing on.
func (s *Server) Watched() bool { return s.watched.Load() > 0 }

// Changed tells the consoles that a (started, changed or ended). The
// output of an action that ended goes out first.
func (s *Server) Changed(a Action) {
	s.stamp(&a)
	if !a.Ended.IsZero() {
		s.flushOutput(a.Handle)
	}
	s.publish(Event{Action: &a})
}

func (s *Server) stamp(a *Action) {
	s.mu.Lock()
	a.Serve, a.Client = s.serve.ID, s.serve.Client
	s.mu.Unlock()
}

// Output passes on a piece of an action's redacted output, at offset in
// its stream. It copies what it keeps of p, and costs nothing while no
// console is connected.
func (s *Server) Output(handle, stream string, offset int64, p []byte) {
	if !s.Watched() || len(p) == 0 {
		return
	}
	s.outMu.Lock()
	k := outKey{handle, stream}
	po := s.pending[k]
	if po == nil {
		po = &pendingOut{off: offset}
		s.pending[k] = po
	}
	po.add(offset, p)
	s.outMu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// pump sends the pending output every outputEvery while there is some.
func (s *Server) pump() {
	t := time.NewTimer(outputEvery)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.kick:
		}
		s.flushOutput("")
		t.Reset(outputEvery)
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// flushOutput sends the pending output: of every stream, each up to its
// last whole character; or, for handle (an action that ended), of its
// streams, all of it.
func (s *Server) flushOutput(handle string) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	for k, po := range s.pending {
		if handle != "" && k.handle != handle {
			continue
		}
		final := handle != ""
		if len(po.tail) == 0 {
			po.off, po.head = s.sendOutput(k, po.off, po.head, final)
		} else {
			// The gap after head: its last partial character goes too.
			s.sendOutput(k, po.off, po.head, true)
			po.off, po.head = s.sendOutput(k, po.tailOff, po.tail, final)
			po.tail = po.tail[:0]
		}
		if len(po.head) == 0 {
			delete(s.pending, k)
		}
	}
}

// sendOutput publishes b, from offset off, up to its last whole
// character unless final (then all of it), and returns what is left of
// b, at its offset.
func (s *Server) sendOutput(k outKey, off int64, b []byte, final bool) (int64, []byte) {
	start, data := piece(off, b, final)
	if data != "" {
		s.publish(Event{Output: &Output{Serve: s.serve.ID, Handle: k.handle, Stream: k.stream,
			Offset: start, Data: data}})
	}
	used := int(start-off) + len(data)
	return off + int64(used), b[:copy(b, b[used:])]
}

// piece is what of b, from offset off, goes out as one Output: from its
// first character (b may start inside one) up to its last whole
// character, or to its end if final; and the offset of that.
func piece(off int64, b []byte, final bool) (int64, string) {
	skip := 0
	for skip < len(b) && !utf8.RuneStart(b[skip]) {
		skip++
	}
	n := len(b) - skip
	if !final {
		n = wholeChars(b[skip:])
	}
	return off + int64(skip), string(b[skip : skip+n])
}

// wholeChars is the length of b up to the end of its last whole
// character: a character whose last bytes have not arrived waits for
// them.
func wholeChars(b []byte) int {
	for k := 1; k <= utf8.UTFMax && k <= len(b); k++ {
		if i := len(b) - k; utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}

// publish queues ev for every connected console.
func (s *Server) publish(ev Event) {
	if !s.Watched() {
		return
	}
	f := encode(serveFrame{Event: &ev})
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.enqueue(f, false)
	}
}

// snapshot is the serve's whole view now.
func (s *Server) snapshot() Snapshot {
	actions := s.src.Actions()
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := Snapshot{Serves: []Serve{s.serve}, Actions: make([]Action, 0, len(actions)), Questions: []Question{}}
	for _, a := range actions {
		a.Serve, a.Client = s.serve.ID, s.serve.Client
		snap.Actions = append(snap.Actions, a)
	}
	for _, q := range s.questions {
		snap.Questions = append(snap.Questions, q.q)
	}
	return snap
}

// Ask puts q to the person at a console and waits for the answer, or for
// ctx to end (then it returns ctx's error; the caller tells a timeout from
// a call that ended). q's Serve, ID and AskedAt are set here; Expires is
// ctx's deadline when it has one. posted, if not nil, is called once q
// waits, before Ask waits, with the address of q on the page of the
// console that connected last and told where its page is, or "" when no
// console did; it must not block.
func (s *Server) Ask(ctx context.Context, q Question, posted func(page string)) (Answer, error) {
	q.Serve, q.ID, q.AskedAt = s.serve.ID, rand.Text(), time.Now().UTC()
	if d, ok := ctx.Deadline(); ok {
		q.Expires = d.UTC()
	}
	q.Text, q.Target = clip(q.Text), clip(q.Target)
	qq := &question{q: q, answer: make(chan Answer, 1)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return "", ErrClosed
	}
	s.questions[q.ID] = qq
	page := s.page()
	s.mu.Unlock()
	s.publish(Event{Question: &q})
	if posted != nil {
		if page != "" {
			page = questionPage(page, q.ID)
		}
		posted(page)
	}
	defer func() {
		s.mu.Lock()
		delete(s.questions, q.ID)
		s.mu.Unlock()
		s.publish(Event{QuestionGone: q.ID})
	}()
	select {
	case a := <-qq.answer:
		return a, nil
	case <-ctx.Done():
		return "", ctx.Err()
	case <-s.ctx.Done():
		return "", ErrClosed
	}
}

// page is the page of the console that connected last and told one, or
// ""; s.mu is held.
func (s *Server) page() string {
	var last *conn
	for c := range s.conns {
		if c.page != "" && (last == nil || c.seq > last.seq) {
			last = c
		}
	}
	if last == nil {
		return ""
	}
	return last.page
}

// ErrNoQuestion is the error of an answer to a question not waiting
// (answered, expired, withdrawn, or never asked).
var ErrNoQuestion = errors.New("no such question is waiting")

// answer gives the waiting question id the answer a.
func (s *Server) answer(id string, a Answer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	qq := s.questions[id]
	if qq == nil {
		return ErrNoQuestion
	}
	switch {
	case a == Approve, a == Deny, a == ApproveFor && qq.q.Remember > 0:
	default:
		return fmt.Errorf("the answer %.32q is not one the question offers", a)
	}
	delete(s.questions, id)
	qq.answer <- a
	return nil
}

func clip(s string) string {
	if len(s) <= clipWhat {
		return s
	}
	n := clipWhat
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Clip cuts s to what a snapshot holds of an action's text.
func Clip(s string) string { return clip(s) }

func (s *Server) accept() {
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Warn("console socket: accept failed; no console can connect", "error", err)
			}
			return
		}
		c := &conn{s: s, c: nc, reqs: make(chan struct{}, maxInFlight)}
		c.cond = sync.NewCond(&c.mu)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.connected++
		c.seq = s.connected
		s.conns[c] = struct{}{}
		s.watched.Add(1)
		// The first frame: what is there now. Events from here on are
		// queued behind it.
		c.resync = true
		s.mu.Unlock()
		s.log.Info("a console connected")
		s.wg.Go(c.writeLoop)
		s.wg.Go(c.readLoop)
	}
}

// conn is one connected console.
type conn struct {
	s *Server
	c net.Conn

	mu     sync.Mutex
	cond   *sync.Cond // signalled when queue, resync or closed change
	queue  [][]byte
	queued int  // bytes in queue
	missed int  // events dropped since the last snapshot
	resync bool // a snapshot is due once queue is sent
	closed bool

	reqs chan struct{} // a slot per request carried out
	once sync.Once

	// Under the Server's mu:
	seq  uint64 // the order it connected in
	page string // its page's address, once it told it (checkPage)
}

// enqueue queues frame f; one that does not fit is dropped and counted,
// unless must (a reply, of which at most maxInFlight wait).
func (c *conn) enqueue(f []byte, must bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if !must && (c.resync || len(c.queue) >= maxQueueFrames || c.queued+len(f) > maxQueueBytes) {
		c.missed++
		c.resync = true
		c.cond.Signal()
		return
	}
	c.queue = append(c.queue, f)
	c.queued += len(f)
	c.cond.Signal()
}

// writeLoop sends the queue, and a snapshot when one is due.
func (c *conn) writeLoop() {
	defer c.close()
	w := bufio.NewWriterSize(c.c, 64<<10)
	for {
		c.mu.Lock()
		for len(c.queue) == 0 && !c.resync && !c.closed {
			c.cond.Wait()
		}
		if c.closed {
			c.mu.Unlock()
			return
		}
		batch := c.queue
		c.queue, c.queued = nil, 0
		missed, resync := 0, false
		if len(batch) == 0 {
			missed, resync = c.missed, true
			c.missed, c.resync = 0, false
		}
		c.mu.Unlock()
		if resync {
			if missed > 0 {
				batch = append(batch, encode(serveFrame{Event: &Event{Missed: missed}}))
			}
			snap := c.s.snapshot()
			batch = append(batch, encode(serveFrame{Snapshot: &snap}))
			// What the running actions printed before: a console that
			// connects (or missed events) sees the end of it first.
			for _, o := range c.s.src.Recent() {
				if off, data := piece(o.Offset, []byte(o.Data), false); data != "" {
					o.Serve, o.Offset, o.Data = snap.Serves[0].ID, off, data
					batch = append(batch, encode(serveFrame{Event: &Event{Output: &o}}))
				}
			}
		}
		for _, f := range batch {
			if _, err := w.Write(f); err != nil {
				return
			}
		}
		if err := w.Flush(); err != nil {
			return
		}
	}
}

// readLoop carries out the console's requests; a frame that is too long
// or no request drops the console.
func (c *conn) readLoop() {
	defer c.close()
	r := bufio.NewReaderSize(c.c, maxRequestBytes)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			c.s.log.Warn("console dropped: it sent a frame over the limit", "limit_bytes", maxRequestBytes)
			return
		}
		if err != nil {
			return
		}
		var req request
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		err = dec.Decode(&req)
		if err == nil {
			err = req.check()
		}
		if err != nil {
			c.s.log.Warn("console dropped: it sent a frame that is no request", "error", err)
			return
		}
		select {
		case c.reqs <- struct{}{}:
		default:
			c.enqueue(encode(serveFrame{Reply: &reply{ID: req.ID, Error: fmt.Sprintf("busy: %d requests are being carried out", maxInFlight)}}), true)
			continue
		}
		c.s.wg.Go(func() {
			defer func() { <-c.reqs }()
			rep := c.carryOut(&req)
			c.enqueue(encode(serveFrame{Reply: rep}), true)
		})
	}
}

// carryOut does what req asks.
func (c *conn) carryOut(req *request) *reply {
	s := c.s
	rep := &reply{ID: req.ID}
	switch {
	case req.Page != nil:
		if err := checkPage(req.Page.URL); err != nil {
			rep.Error = err.Error()
			break
		}
		s.mu.Lock()
		c.page = req.Page.URL
		s.mu.Unlock()
	case req.Stop != nil:
		st, err := s.src.Stop(s.ctx, req.Stop.Handle)
		if err != nil {
			rep.Error = err.Error()
		} else {
			rep.Stop = &st
		}
		s.log.Info("the person's console stopped an action", "handle", req.Stop.Handle, "error", rep.Error)
	case req.Answer != nil:
		if err := s.answer(req.Answer.Question, req.Answer.Answer); err != nil {
			rep.Error = err.Error()
		}
	}
	return rep
}

// close drops the console, once.
func (c *conn) close() {
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.queue = nil
		c.cond.Broadcast()
		c.mu.Unlock()
		c.c.Close()
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
		c.s.watched.Add(-1)
		c.s.log.Info("a console disconnected")
	})
}
