package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/mcpserver/internal/wire"
)

const (
	// writeQueueLen bounds the frames waiting for stdout. Handlers block in
	// Write (honouring their context) when it is full; the reader never does.
	writeQueueLen = 32
	// blockedWarnAfter is how long one stdout write may take before the
	// writer logs that the host is not reading.
	blockedWarnAfter = 2 * time.Second
	// methodCancelled is the MCP cancellation notification.
	methodCancelled = "notifications/cancelled"
)

// codeInvalidRequest answers batches, frames over the wire limit and JSON
// that is not a JSON-RPC message.
const codeInvalidRequest = jsonrpc.CodeInvalidRequest

// conn is the server's mcp.Connection over a byte stream pair. One goroutine
// reads and frames the input, one goroutine owns the output; both are
// started by newConn and stopped by shutdown.
type conn struct {
	in      io.Reader
	out     io.Writer
	fr      *wire.Reader
	limit   int
	metrics *wire.Metrics
	log     *slog.Logger

	incoming chan jsonrpc.Message // reader → Read
	readDone chan struct{}        // closed when the reader goroutine ends
	readErr  error                // why it ended; set before readDone closes

	queue     chan outFrame // Write and reader → writer
	writeDone chan struct{} // closed when the writer goroutine ends on an error
	writeErr  error         // set before writeDone closes

	closeOnce sync.Once
	closed    chan struct{} // Close was called: no more messages either way
	abortOnce sync.Once
	aborted   chan struct{} // the session is being torn down from outside
	abortErr  error

	writerExited chan struct{}

	mu       sync.Mutex
	inflight map[jsonrpc.ID]*inflight // calls read whose response has not started
	// asked are the requests sent to the host under a withdrawal (a
	// question) that it has not answered, until their withdrawal is
	// done: see withdrawal.
	asked     map[jsonrpc.ID]*sentRequest
	withdrawn atomic.Int64 // requests withdrawn with notifications/cancelled
}

// inflight is one call from the host whose response has not begun to be
// written. Entries are keyed by id; a repeated id while one is in flight
// shares the entry (the SDK rejects the duplicate with a null-id error).
type inflight struct {
	cancelled bool
}

// sentRequest is a request the server sent the host under a withdrawal.
type sentRequest struct {
	// withdrawn: the withdrawal's cancellation is queued, and the SDK's
	// own (which it sends from a goroutine of its own when the request's
	// context ends, maybe after the call's result) is dropped when it
	// comes. sdkCancelled: it came first, and was dropped.
	withdrawn, sdkCancelled bool
}

type outFrame struct {
	data  []byte
	id    jsonrpc.ID // for a response to a tracked call, or a request asked
	call  *inflight  // nil unless data is such a response
	asked bool       // data is a request sent under a withdrawal
}

func newConn(in io.Reader, out io.Writer, limit int, metrics *wire.Metrics, log *slog.Logger) *conn {
	c := &conn{
		in:        in,
		out:       out,
		fr:        wire.NewReader(in, limit, metrics),
		limit:     limit,
		metrics:   metrics,
		log:       log,
		incoming:  make(chan jsonrpc.Message),
		readDone:  make(chan struct{}),
		queue:     make(chan outFrame, writeQueueLen),
		writeDone: make(chan struct{}),
		closed:    make(chan struct{}),
		aborted:   make(chan struct{}),
		inflight:  make(map[jsonrpc.ID]*inflight),
		asked:     make(map[jsonrpc.ID]*sentRequest),

		writerExited: make(chan struct{}),
	}
	go c.readLoop()
	go c.writeLoop()
	return c
}

// Connect lets conn serve as its own mcp.Transport.
func (c *conn) Connect(context.Context) (mcp.Connection, error) { return c, nil }

func (c *conn) SessionID() string { return "" }

// Read returns the next message from the host. Errors about single frames
// never reach here: the reader answers them itself and goes on.
func (c *conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case msg := <-c.incoming:
		return msg, nil
	case <-c.readDone:
		return nil, c.readErr
	case <-c.aborted:
		return nil, c.abortErr
	case <-c.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write hands one message to the writer. A response to a call the host has
// cancelled is dropped here, or later by the writer if the cancel arrives
// while it waits in the queue; once its first byte is written it is sent
// whole.
func (c *conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encoding message: %w", err)
	}
	f := outFrame{data: append(data, '\n')}
	if req, ok := msg.(*jsonrpc.Request); ok && c.sending(ctx, req, &f) {
		return nil
	}
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID.IsValid() {
		c.mu.Lock()
		call := c.inflight[resp.ID]
		if call != nil && call.cancelled {
			delete(c.inflight, resp.ID)
			c.mu.Unlock()
			c.dropped(resp.ID, "before queueing")
			return nil
		}
		c.mu.Unlock()
		f.id, f.call = resp.ID, call
	}
	select {
	case c.queue <- f:
		if f.call != nil {
			c.log.Debug("response queued", "id", f.id.Raw())
		}
		return nil
	case <-ctx.Done():
		c.forget(f)
		return ctx.Err()
	case <-c.writeDone:
		c.forget(f)
		return c.writeErr
	case <-c.aborted:
		c.forget(f)
		return c.abortErr
	case <-c.closed:
		c.forget(f)
		return mcp.ErrConnectionClosed
	}
}

// sending notes a request the server sends: a call under a withdrawal is
// recorded with it. It reports true for the SDK's cancellation of such a
// call, which is dropped: the withdrawal sends its own, ahead of the
// call's result.
func (c *conn) sending(ctx context.Context, req *jsonrpc.Request, f *outFrame) (drop bool) {
	if req.IsCall() {
		if w, ok := ctx.Value(withdrawalKey{}).(*withdrawal); ok {
			// Recorded before it is queued, so that an answer read at
			// once finds it; forget undoes it if it is never queued.
			c.mu.Lock()
			c.asked[req.ID] = &sentRequest{}
			c.mu.Unlock()
			w.add(c, req.ID)
			f.id, f.asked = req.ID, true
		}
		return false
	}
	if req.Method != methodCancelled {
		return false
	}
	id, ok := cancelledID(req.Params)
	if !ok {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	sr := c.asked[id]
	switch {
	case sr == nil:
		return false
	case sr.withdrawn:
		delete(c.asked, id) // nothing more will come for it
	default:
		sr.sdkCancelled = true
	}
	c.log.Debug("the SDK's cancellation of a question dropped: its withdrawal sends one", "id", id.Raw())
	return true
}

// A withdrawal collects the requests the server sends the host under a
// context (withWithdrawal), so that those it stops waiting for are
// withdrawn at the host before anything the server sends after: a
// question that timed out, or whose call was cancelled, is gone from the
// client when the call's result arrives. Whoever makes one must call
// withdraw once the requests are done with.
type withdrawal struct {
	mu  sync.Mutex
	c   *conn
	ids []jsonrpc.ID
}

type withdrawalKey struct{}

// withWithdrawal returns ctx with a new withdrawal for the requests sent
// under it.
func withWithdrawal(ctx context.Context) (context.Context, *withdrawal) {
	w := &withdrawal{}
	return context.WithValue(ctx, withdrawalKey{}, w), w
}

func (w *withdrawal) add(c *conn, id jsonrpc.ID) {
	w.mu.Lock()
	w.c = c
	w.ids = append(w.ids, id)
	w.mu.Unlock()
}

// withdraw sends notifications/cancelled, with reason, for each request
// sent under w that the host has not answered, and returns once they are
// queued (or the connection is gone): what is written after comes after
// them. It returns how many it withdrew.
func (w *withdrawal) withdraw(reason string) int {
	w.mu.Lock()
	c, ids := w.c, w.ids
	w.ids = nil
	w.mu.Unlock()
	n := 0
	for _, id := range ids {
		if c.withdraw(id, reason) {
			n++
		}
	}
	return n
}

func (c *conn) withdraw(id jsonrpc.ID, reason string) bool {
	c.mu.Lock()
	sr := c.asked[id]
	if sr == nil || sr.withdrawn {
		c.mu.Unlock()
		return false // answered, or withdrawn already
	}
	sr.withdrawn = true
	if sr.sdkCancelled {
		delete(c.asked, id)
	}
	c.mu.Unlock()
	params, err := json.Marshal(&mcp.CancelledParams{RequestID: id.Raw(), Reason: reason})
	if err != nil {
		c.log.Error("withdrawal not encoded", "id", id.Raw(), "error", err)
		return false
	}
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Request{Method: methodCancelled, Params: params})
	if err != nil {
		c.log.Error("withdrawal not encoded", "id", id.Raw(), "error", err)
		return false
	}
	// No deadline: a host that does not read gets the withdrawal once it
	// reads again, and nothing after it goes out before it anyway.
	c.log.Debug("withdrawing a question", "id", id.Raw())
	select {
	case c.queue <- outFrame{data: append(data, '\n')}:
		c.withdrawn.Add(1)
		c.log.Info("question withdrawn at the client", "id", id.Raw(), "reason", reason)
		return true
	case <-c.writeDone:
	case <-c.aborted:
	case <-c.closed:
	}
	return false
}

// asking reports how many questions the host has neither answered nor
// had withdrawn, and how many were withdrawn so far.
func (c *conn) asking() (open int, withdrawn int64) {
	c.mu.Lock()
	for _, sr := range c.asked {
		if !sr.withdrawn {
			open++
		}
	}
	c.mu.Unlock()
	return open, c.withdrawn.Load()
}

// answered forgets a request of the server's that the host answered.
func (c *conn) answered(resp *jsonrpc.Response) {
	if !resp.ID.IsValid() {
		return
	}
	c.mu.Lock()
	delete(c.asked, resp.ID)
	c.mu.Unlock()
}

// cancelledID is the request a notifications/cancelled names.
func cancelledID(params json.RawMessage) (jsonrpc.ID, bool) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	return id, err == nil && id.IsValid()
}

// Close ends the connection for the SDK: Read returns io.EOF and Write
// fails. The writer still flushes what was queued (see shutdown).
func (c *conn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

// abort tears the session down from outside (the server's context ended):
// Read fails with err, and blocked reads and writes are interrupted where
// the streams allow deadlines.
func (c *conn) abort(err error) {
	c.abortOnce.Do(func() {
		c.abortErr = err
		close(c.aborted)
		c.interruptRead()
		if d, ok := c.out.(interface{ SetWriteDeadline(time.Time) error }); ok {
			_ = d.SetWriteDeadline(time.Unix(1, 0))
		}
	})
}

// interruptRead makes a blocked read of in return, and reports whether the
// stream allowed it.
func (c *conn) interruptRead() bool {
	d, ok := c.in.(interface{ SetReadDeadline(time.Time) error })
	return ok && d.SetReadDeadline(time.Unix(1, 0)) == nil
}

// shutdown stops both goroutines and waits for them. The writer first
// flushes the queue unless the session was aborted. A reader blocked on a
// stream without deadlines (a plain blocking stdin) cannot be stopped: it is
// left to end at its next read, touching nothing but this conn.
func (c *conn) shutdown() {
	c.Close()
	<-c.writerExited
	if c.interruptRead() {
		<-c.readDone
		return
	}
	select {
	case <-c.readDone:
	default:
		c.log.Debug("stdin cannot be interrupted; its reader ends at the next read")
	}
}

// forget undoes what Write noted of a frame it did not queue.
func (c *conn) forget(f outFrame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.asked {
		delete(c.asked, f.id)
	}
	if f.call != nil && c.inflight[f.id] == f.call {
		delete(c.inflight, f.id)
	}
}

func (c *conn) dropped(id jsonrpc.ID, when string) {
	c.metrics.ResponsesDropped.Add(1)
	c.log.Debug("dropped the response to a cancelled request", "id", id.Raw(), "when", when)
}

func (c *conn) readLoop() {
	defer close(c.readDone)
	for {
		frame, err := c.fr.Next()
		if err != nil {
			var oe *wire.OversizeError
			if errors.As(err, &oe) {
				id := oe.ID()
				c.log.Warn("discarded an oversize frame", "bytes", oe.Size, "max_frame_bytes", oe.Limit, "id_read", id != nil)
				c.reply(id, codeInvalidRequest,
					fmt.Sprintf("frame of %d bytes exceeds max_frame_bytes (%d) and was discarded", oe.Size, oe.Limit),
					map[string]int64{"max_frame_bytes": int64(oe.Limit), "frame_bytes": oe.Size})
				continue
			}
			c.readErr = err
			return
		}
		msg, ok := c.decode(frame, c.fr.Owned())
		if !ok {
			continue
		}
		c.track(msg)
		select {
		case c.incoming <- msg:
		case <-c.closed:
			c.readErr = io.EOF
			return
		case <-c.aborted:
			c.readErr = c.abortErr
			return
		}
	}
}

// decode parses one frame, answering it with an error if it is not a single
// JSON-RPC message. The error carries the frame's id whenever its top
// level shows one, so that the call it was ends at the client: a frame
// nested deeper than the decoder allows, JSON that breaks off after the
// id, a message with a member of the wrong type.
func (c *conn) decode(frame []byte, owned bool) (jsonrpc.Message, bool) {
	small, value, lifted := lift(frame, owned)
	msg, err := wire.Decode(small)
	if err == nil {
		if lifted {
			carry(msg, value)
			c.metrics.ArgumentsLifted.Add(1)
		}
		return msg, true
	}
	c.metrics.ParseErrors.Add(1)
	id, whole := wire.RequestID(frame)
	switch {
	case !whole && !json.Valid(frame):
		// A whole object that json.Valid refuses is one nested too deep
		// for it: valid JSON, and answered as an invalid request below.
		c.log.Warn("malformed JSON frame", "bytes", len(frame), "id_read", id != nil)
		c.reply(id, jsonrpc.CodeParseError, "parse error: the frame is not valid JSON", nil)
	case bytes.HasPrefix(bytes.TrimLeft(frame, " \t"), []byte("[")):
		c.log.Warn("JSON-RPC batch rejected", "bytes", len(frame))
		c.reply(nil, codeInvalidRequest, "JSON-RPC batches are not supported: send one message per line", nil)
	default:
		c.log.Warn("invalid JSON-RPC message", "bytes", len(frame), "id_read", id != nil, "error", err)
		c.reply(id, codeInvalidRequest, "invalid request: "+err.Error(), nil)
	}
	return nil, false
}

// track records calls in flight and acts on cancellations at once, in the
// reader, so a cancel counts even while every handler and the writer are
// stuck.
func (c *conn) track(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		c.answered(msg.(*jsonrpc.Response))
		return
	}
	if req.IsCall() {
		c.mu.Lock()
		if c.inflight[req.ID] == nil {
			c.inflight[req.ID] = &inflight{}
		}
		c.mu.Unlock()
		return
	}
	if req.Method != methodCancelled {
		return
	}
	c.metrics.CancelsReceived.Add(1)
	id, ok := cancelledID(req.Params)
	if !ok {
		return
	}
	c.mu.Lock()
	if call := c.inflight[id]; call != nil {
		call.cancelled = true
	}
	c.mu.Unlock()
	c.log.Debug("cancel received", "id", id.Raw())
}

// reply queues an error for a frame that could not be taken, with the
// frame's id (nil: null), without ever blocking the reader: with the
// queue full (stdout blocked), the answer is dropped and logged.
func (c *conn) reply(id json.RawMessage, code int64, message string, data any) {
	select {
	case c.queue <- outFrame{data: wire.ErrorFrame(id, code, message, data)}:
	default:
		c.log.Warn("write queue full; error reply not sent", "code", code)
	}
}

func (c *conn) writeLoop() {
	defer close(c.writerExited)
	for {
		select {
		case f := <-c.queue:
			if !c.writeFrame(f) {
				return
			}
		case <-c.aborted:
			return
		case <-c.closed:
			// Flush what handlers queued before the SDK closed us.
			for {
				select {
				case f := <-c.queue:
					if !c.writeFrame(f) {
						return
					}
				default:
					return
				}
			}
		}
	}
}

// writeFrame writes one frame, unless it answers a call cancelled while it
// waited in the queue. It reports false once stdout has failed.
func (c *conn) writeFrame(f outFrame) bool {
	if f.call != nil {
		c.mu.Lock()
		cancelled := f.call.cancelled
		if c.inflight[f.id] == f.call {
			delete(c.inflight, f.id)
		}
		c.mu.Unlock()
		if cancelled {
			c.dropped(f.id, "in the queue")
			return true
		}
	}
	start := time.Now()
	warn := time.AfterFunc(blockedWarnAfter, func() {
		c.log.Warn("stdout write blocked: the host is not reading", "frame_bytes", len(f.data))
	})
	n, err := c.out.Write(f.data)
	warn.Stop()
	c.metrics.NoteWrite(n, time.Since(start), err == nil)
	if err != nil {
		c.writeErr = fmt.Errorf("writing stdout: %w", err)
		close(c.writeDone)
		c.log.Error("stdout write failed", "error", err)
		return false
	}
	return true
}
