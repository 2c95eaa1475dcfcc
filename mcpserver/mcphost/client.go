package mcphost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/mcpserver/internal/wire"
)

// ProtocolVersion is the MCP version Initialize asks for.
const ProtocolVersion = "2025-11-25"

// ErrClosed is returned for calls that cannot complete because the server's
// stdout ended or the client was closed.
var ErrClosed = errors.New("mcphost: connection closed")

// Options configures a Client. Every zero value has a working default.
type Options struct {
	// MaxFrameBytes is the host's own wire limit for frames from the
	// server; default 64 MiB. Longer lines are discarded and counted.
	MaxFrameBytes int
	// QueueLen bounds the notifications and server requests waiting for
	// dispatch; default 256. When it is full the reader drops and counts
	// them rather than stop reading.
	QueueLen int
	// CloseTimeout is how long Close waits for the server to exit after
	// closing its stdin before killing it; default 5 s.
	CloseTimeout time.Duration
	// Logger receives the client's own logs; nil discards them.
	Logger *slog.Logger
	// Name and Version are sent as clientInfo; default "actiongw-host".
	Name, Version string
	// OnError, if set, receives error responses with a null id: the
	// server's answers to frames it could not take (oversize, malformed,
	// batches). It runs on the dispatch goroutine.
	OnError func(*jsonrpc.Error)
	// OnElicit, if set, answers the server's elicitation/create requests
	// (a question for the person at the host), and Initialize declares
	// form elicitation. It runs on a goroutine of its own per question;
	// ctx ends when the server cancels the question or the client
	// closes. Without it the host declares no elicitation support.
	OnElicit func(ctx context.Context, params *mcp.ElicitParams) (*mcp.ElicitResult, error)
	// Elicitation is what Initialize declares when OnElicit is set; nil
	// declares form elicitation.
	Elicitation *mcp.ElicitationCapabilities
	// OnNotify, if set, receives the server's notifications other than
	// progress and cancellation, on the dispatch goroutine.
	OnNotify func(method string, params json.RawMessage)
}

// ProgressFunc receives the progress notifications of one call. It runs on
// the dispatch goroutine, never on the reader.
type ProgressFunc func(mcp.ProgressNotificationParams)

// Metrics are the host's transport counters: "stdin" is the server's stdout
// as read here, "stdout" the server's stdin as written here.
// ResponsesDropped counts responses that matched no waiting call (such as a
// late reply to a cancelled one).
type Metrics struct {
	wire.Snapshot
	CancelsSent     int64 `json:"cancels_sent"`
	DispatchDropped int64 `json:"dispatch_dropped"`
}

// Client is one running server process and its MCP session.
type Client struct {
	opts    Options
	log     *slog.Logger
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  io.ReadCloser
	gate    gate
	metrics wire.Metrics

	cancelsSent     atomic.Int64
	dispatchDropped atomic.Int64
	nextID          atomic.Int64

	writeMu sync.Mutex

	mu       sync.Mutex
	pending  map[int64]*Pending
	progress map[string]ProgressFunc
	// asking cancels the questions OnElicit is answering, by request id;
	// asked waits for them, and closing ends their contexts.
	asking  map[jsonrpc.ID]context.CancelFunc
	asked   sync.WaitGroup
	closing context.Context
	closed  context.CancelFunc
	// outstanding are the server's requests read and neither answered
	// nor withdrawn, by id: their methods.
	outstanding map[jsonrpc.ID]string

	queue        chan jsonrpc.Message // reader → dispatcher: requests and null-id errors
	readerDone   chan struct{}
	dispatchDone chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// Start starts cmd, which must not have Stdin or Stdout set, and begins
// reading its stdout. cmd.Stderr is left as the caller set it. The caller
// must Close the client.
func Start(ctx context.Context, cmd *exec.Cmd, opts Options) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if opts.MaxFrameBytes <= 0 {
		opts.MaxFrameBytes = 64 << 20
	}
	if opts.QueueLen <= 0 {
		opts.QueueLen = 256
	}
	if opts.CloseTimeout <= 0 {
		opts.CloseTimeout = 5 * time.Second
	}
	if opts.Name == "" {
		opts.Name = "actiongw-host"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("mcphost: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("mcphost: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("mcphost: starting server: %w", err)
	}
	c := &Client{
		opts:         opts,
		log:          log,
		cmd:          cmd,
		stdin:        stdin,
		stdout:       stdout,
		pending:      make(map[int64]*Pending),
		progress:     make(map[string]ProgressFunc),
		asking:       make(map[jsonrpc.ID]context.CancelFunc),
		outstanding:  make(map[jsonrpc.ID]string),
		queue:        make(chan jsonrpc.Message, opts.QueueLen),
		readerDone:   make(chan struct{}),
		dispatchDone: make(chan struct{}),
	}
	c.closing, c.closed = context.WithCancel(context.Background())
	go c.readLoop()
	go c.dispatchLoop()
	return c, nil
}

// Pid is the server's process id.
func (c *Client) Pid() int { return c.cmd.Process.Pid }

// Pending is a call sent to the server whose response may not have arrived.
type Pending struct {
	c     *Client
	id    int64
	token string // progress token, if any
	done  chan struct{}
	resp  *jsonrpc.Response
	err   error
}

// ID is the JSON-RPC id of the call, for Cancel.
func (p *Pending) ID() int64 { return p.id }

// Wait returns the call's result. A JSON-RPC error comes back as a
// *jsonrpc.Error. If ctx ends first, Wait sends a cancel for the call and
// returns the context's error.
func (p *Pending) Wait(ctx context.Context) (json.RawMessage, error) {
	select {
	case <-p.done:
		if p.err != nil {
			return nil, p.err
		}
		if p.resp.Error != nil {
			return nil, p.resp.Error
		}
		return p.resp.Result, nil
	case <-ctx.Done():
		if err := p.c.Cancel(p.id, context.Cause(ctx).Error()); err != nil {
			p.c.log.Debug("cancel not sent", "id", p.id, "error", err)
		}
		return nil, ctx.Err()
	}
}

// WaitTool is Wait for a tools/call, decoding the result.
func (p *Pending) WaitTool(ctx context.Context) (*mcp.CallToolResult, error) {
	raw, err := p.Wait(ctx)
	if err != nil {
		return nil, err
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("mcphost: decoding tool result: %w", err)
	}
	return &res, nil
}

func (p *Pending) finish(resp *jsonrpc.Response, err error) {
	p.resp, p.err = resp, err
	close(p.done)
}

// Send writes a call and returns at once; Wait on the result.
func (c *Client) Send(ctx context.Context, method string, params any) (*Pending, error) {
	return c.send(ctx, method, func(int64) any { return params }, nil)
}

// send registers a call before writing it, so even an immediate response
// finds its waiter. paramsFor may use the id (for a progress token).
func (c *Client) send(ctx context.Context, method string, paramsFor func(id int64) any, progress ProgressFunc) (*Pending, error) {
	id := c.nextID.Add(1)
	p := &Pending{c: c, id: id, done: make(chan struct{})}
	frame, err := encodeRequest(int64ID(id), method, paramsFor(id))
	if err != nil {
		return nil, fmt.Errorf("mcphost: encoding %s params: %w", method, err)
	}
	c.mu.Lock()
	select {
	case <-c.readerDone:
		c.mu.Unlock()
		return nil, ErrClosed
	default:
	}
	c.pending[id] = p
	if progress != nil {
		p.token = progressToken(id)
		c.progress[p.token] = progress
	}
	c.mu.Unlock()
	if err := c.writeFrame(ctx, frame); err != nil {
		c.forget(p)
		return nil, err
	}
	return p, nil
}

// SendFrame writes frame as one line, verbatim, for tests of what a server
// does with any input. If id is not zero the frame is taken to be a call
// with that id (which must not collide with the client's own ids, counted
// up from 1) and the returned Pending waits for its response.
func (c *Client) SendFrame(ctx context.Context, id int64, frame []byte) (*Pending, error) {
	var p *Pending
	if id != 0 {
		p = &Pending{c: c, id: id, done: make(chan struct{})}
		c.mu.Lock()
		c.pending[id] = p
		c.mu.Unlock()
	}
	if err := c.writeFrame(ctx, append(frame[:len(frame):len(frame)], '\n')); err != nil {
		if p != nil {
			c.forget(p)
		}
		return nil, err
	}
	return p, nil
}

// Call sends a call and waits for its result; see Pending.Wait.
func (c *Client) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	p, err := c.Send(ctx, method, params)
	if err != nil {
		return nil, err
	}
	return p.Wait(ctx)
}

// Notify sends a notification.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	frame, err := encodeRequest(jsonrpc.ID{}, method, params)
	if err != nil {
		return fmt.Errorf("mcphost: encoding %s params: %w", method, err)
	}
	return c.writeFrame(ctx, frame)
}

// Initialize performs the MCP handshake.
func (c *Client) Initialize(ctx context.Context) (*mcp.InitializeResult, error) {
	raw, err := c.Call(ctx, "initialize", &mcp.InitializeParams{
		ProtocolVersion: ProtocolVersion,
		ClientInfo:      &mcp.Implementation{Name: c.opts.Name, Version: c.opts.Version},
		Capabilities:    c.capabilities(),
	})
	if err != nil {
		return nil, fmt.Errorf("mcphost: initialize: %w", err)
	}
	var res mcp.InitializeResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("mcphost: decoding initialize result: %w", err)
	}
	if err := c.Notify(ctx, "notifications/initialized", &mcp.InitializedParams{}); err != nil {
		return nil, err
	}
	return &res, nil
}

// StartTool sends a tools/call and returns at once. progress, if not nil,
// asks the server for progress notifications and receives them.
func (c *Client) StartTool(ctx context.Context, name string, args any, progress ProgressFunc) (*Pending, error) {
	return c.send(ctx, "tools/call", func(id int64) any {
		params := map[string]any{"name": name, "arguments": args}
		if progress != nil {
			params["_meta"] = map[string]any{"progressToken": progressToken(id)}
		}
		return params
	}, progress)
}

// CallTool calls a tool and waits for its result.
func (c *Client) CallTool(ctx context.Context, name string, args any, progress ProgressFunc) (*mcp.CallToolResult, error) {
	p, err := c.StartTool(ctx, name, args, progress)
	if err != nil {
		return nil, err
	}
	return p.WaitTool(ctx)
}

// Cancel tells the server to cancel call id and stops waiting for it: a
// response that still arrives is counted as dropped, and Wait on the call
// returns a cancellation error.
func (c *Client) Cancel(id int64, reason string) error {
	c.mu.Lock()
	p := c.pending[id]
	c.mu.Unlock()
	if p != nil {
		c.forget(p)
		p.finish(nil, fmt.Errorf("mcphost: call %d cancelled: %s", id, reason))
	}
	c.cancelsSent.Add(1)
	// The cancel must not wait on a caller's context that is already done.
	return c.Notify(context.Background(), "notifications/cancelled", &mcp.CancelledParams{RequestID: id, Reason: reason})
}

// Metrics returns the current counters.
func (c *Client) Metrics() Metrics {
	return Metrics{
		Snapshot:        c.metrics.Snapshot(),
		CancelsSent:     c.cancelsSent.Load(),
		DispatchDropped: c.dispatchDropped.Load(),
	}
}

// PauseReading stops reading the server's stdout until ResumeReading, to
// test what a server does when its host does not read. A read already in
// progress completes.
func (c *Client) PauseReading() { c.gate.pause() }

// ResumeReading undoes PauseReading.
func (c *Client) ResumeReading() { c.gate.resume() }

// Close closes the server's stdin, waits for it to exit (killing it after
// Options.CloseTimeout) and for the client's goroutines. It returns the
// server's exit error, if any.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.gate.resume()
		_ = c.stdin.Close()
		timer := time.NewTimer(c.opts.CloseTimeout)
		defer timer.Stop()
		select {
		case <-c.readerDone:
		case <-timer.C:
			c.log.Warn("server did not exit after stdin closed; killing it", "pid", c.Pid())
			_ = c.cmd.Process.Kill()
			<-c.readerDone
		}
		c.closeErr = c.cmd.Wait()
		<-c.dispatchDone
		c.closed()
		c.asked.Wait()
	})
	return c.closeErr
}

func (c *Client) forget(p *Pending) {
	c.mu.Lock()
	if c.pending[p.id] == p {
		delete(c.pending, p.id)
	}
	if p.token != "" {
		delete(c.progress, p.token)
	}
	c.mu.Unlock()
}

func (c *Client) write(ctx context.Context, msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("mcphost: encoding message: %w", err)
	}
	return c.writeFrame(ctx, append(data, '\n'))
}

// writeFrame writes one complete line to the server's stdin.
func (c *Client) writeFrame(ctx context.Context, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	start := time.Now()
	n, err := c.stdin.Write(data)
	c.metrics.NoteWrite(n, time.Since(start), err == nil)
	if err != nil {
		return fmt.Errorf("mcphost: writing to server: %w", err)
	}
	return nil
}

// readLoop reads the server's stdout until it ends. It never waits on
// anything but the pipe: responses go straight to their waiters, everything
// else into the bounded dispatch queue or, when that is full, is dropped.
func (c *Client) readLoop() {
	defer close(c.readerDone)
	defer close(c.queue)
	fr := wire.NewReader(gatedReader{&c.gate, c.stdout}, c.opts.MaxFrameBytes, &c.metrics)
	var readErr error
	for {
		frame, err := fr.Next()
		if err != nil {
			var oe *wire.OversizeError
			if errors.As(err, &oe) {
				c.log.Warn("discarded an oversize frame from the server", "bytes", oe.Size, "limit", oe.Limit)
				continue
			}
			readErr = err
			break
		}
		msg, err := decode(frame)
		if err != nil {
			c.metrics.ParseErrors.Add(1)
			c.log.Warn("unparsable frame from the server", "bytes", len(frame), "error", err)
			continue
		}
		if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID.IsValid() {
			c.deliver(resp)
			continue
		}
		if req, ok := msg.(*jsonrpc.Request); ok {
			c.noteRequest(req)
		}
		select {
		case c.queue <- msg:
		default:
			c.dispatchDropped.Add(1)
			c.log.Debug("dispatch queue full; message dropped")
		}
	}
	if !errors.Is(readErr, io.EOF) {
		c.log.Warn("reading server stdout", "error", readErr)
	}
	c.mu.Lock()
	pending := c.pending
	c.pending = map[int64]*Pending{}
	c.mu.Unlock()
	for _, p := range pending {
		p.finish(nil, ErrClosed)
	}
}

func (c *Client) deliver(resp *jsonrpc.Response) {
	id, _ := resp.ID.Raw().(int64)
	c.mu.Lock()
	p := c.pending[id]
	c.mu.Unlock()
	if p == nil {
		c.metrics.ResponsesDropped.Add(1)
		c.log.Debug("response matched no waiting call", "id", resp.ID.Raw())
		return
	}
	c.forget(p)
	p.finish(resp, nil)
}

// dispatchLoop handles notifications and requests from the server, off the
// reader, so a slow progress callback cannot stop the reading.
func (c *Client) dispatchLoop() {
	defer close(c.dispatchDone)
	for msg := range c.queue {
		req, ok := msg.(*jsonrpc.Request)
		if !ok {
			c.nullIDError(msg.(*jsonrpc.Response))
			continue
		}
		switch {
		case req.Method == "notifications/progress":
			var params mcp.ProgressNotificationParams
			if json.Unmarshal(req.Params, &params) != nil {
				continue
			}
			c.mu.Lock()
			fn := c.progress[fmt.Sprint(params.ProgressToken)]
			c.mu.Unlock()
			if fn != nil {
				fn(params)
			}
		case req.Method == "notifications/cancelled":
			if id, ok := cancelledID(req); ok {
				c.mu.Lock()
				cancel := c.asking[id]
				c.mu.Unlock()
				if cancel != nil {
					cancel()
				}
			}
		case req.IsCall() && req.Method == "elicitation/create" && c.opts.OnElicit != nil:
			c.elicit(req)
		case req.IsCall():
			c.answer(req)
		case c.opts.OnNotify != nil:
			c.opts.OnNotify(req.Method, req.Params)
		}
	}
}

// decode is wire.Decode (jsonrpc.DecodeMessage's reading) plus error
// responses with a null id, which the SDK's decoder rejects but a server
// sends for frames it could not take.
func decode(frame []byte) (jsonrpc.Message, error) {
	msg, err := wire.Decode(frame)
	if err == nil {
		return msg, nil
	}
	var w struct {
		Version string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *jsonrpc.Error  `json:"error"`
	}
	if json.Unmarshal(frame, &w) != nil || w.Version != "2.0" || w.Error == nil || (w.ID != nil && string(w.ID) != "null") {
		return nil, err
	}
	return &jsonrpc.Response{Error: w.Error}, nil
}

// nullIDError reports an error response that answers no call.
func (c *Client) nullIDError(resp *jsonrpc.Response) {
	werr := resp.Error.(*jsonrpc.Error) // decode makes no other kind
	c.log.Warn("server rejected a frame", "code", werr.Code, "message", werr.Message)
	if c.opts.OnError != nil {
		c.opts.OnError(werr)
	}
}

// answer replies to a request from the server: ping succeeds, anything else
// is not supported by this host.
func (c *Client) answer(req *jsonrpc.Request) {
	resp := &jsonrpc.Response{ID: req.ID, Result: json.RawMessage("{}")}
	if req.Method != "ping" {
		resp = &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not supported by this host: " + req.Method}}
	}
	c.reply(req, resp)
}

// reply writes the answer to a request of the server's; the request is
// no longer outstanding unless the write failed.
func (c *Client) reply(req *jsonrpc.Request, resp *jsonrpc.Response) {
	// Answered before it is written: whatever the server sends once it
	// has read the reply must find it answered here (the reader counts
	// that at once; this goroutine may run late on a loaded machine).
	c.mu.Lock()
	delete(c.outstanding, req.ID)
	c.mu.Unlock()
	if err := c.write(context.Background(), resp); err != nil {
		c.log.Debug("reply to server request not sent", "method", req.Method, "error", err)
		c.mu.Lock()
		c.outstanding[req.ID] = req.Method
		c.mu.Unlock()
	}
}

// noteRequest counts, in the reader, a request the server sends (it is
// outstanding) or a withdrawal of one (it no longer is), so that when a
// response reaches its caller, everything the server sent before it is
// counted.
func (c *Client) noteRequest(req *jsonrpc.Request) {
	switch {
	case req.IsCall():
		c.mu.Lock()
		c.outstanding[req.ID] = req.Method
		c.mu.Unlock()
	case req.Method == "notifications/cancelled":
		c.metrics.CancelsReceived.Add(1)
		if id, ok := cancelledID(req); ok {
			c.mu.Lock()
			delete(c.outstanding, id)
			c.mu.Unlock()
		}
	}
}

// cancelledID is the request a notifications/cancelled withdraws.
func cancelledID(req *jsonrpc.Request) (jsonrpc.ID, bool) {
	var params mcp.CancelledParams
	if json.Unmarshal(req.Params, &params) != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(params.RequestID)
	return id, err == nil && id.IsValid()
}

// Outstanding returns the methods of the server's requests (such as
// elicitation/create) that this client has read and neither answered nor
// seen withdrawn with notifications/cancelled, one entry per request,
// sorted. The reader counts them as it reads, so once a call's result has
// been returned, every request and withdrawal the server sent before that
// result is counted.
func (c *Client) Outstanding() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	methods := make([]string, 0, len(c.outstanding))
	for _, m := range c.outstanding {
		methods = append(methods, m)
	}
	slices.Sort(methods)
	return methods
}

// capabilities are what Initialize declares: elicitation (form, unless
// Options.Elicitation says) when OnElicit is set.
func (c *Client) capabilities() *mcp.ClientCapabilities {
	switch {
	case c.opts.OnElicit == nil:
		return &mcp.ClientCapabilities{}
	case c.opts.Elicitation != nil:
		return &mcp.ClientCapabilities{Elicitation: c.opts.Elicitation}
	}
	return &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}
}

// elicit answers an elicitation/create request with OnElicit, on a
// goroutine of its own: a person may take minutes, and notifications
// (a cancellation of this very question) must go on being dispatched.
func (c *Client) elicit(req *jsonrpc.Request) {
	key := req.ID
	ctx, cancel := context.WithCancel(c.closing)
	c.mu.Lock()
	c.asking[key] = cancel
	c.mu.Unlock()
	c.asked.Go(func() {
		defer func() {
			c.mu.Lock()
			delete(c.asking, key)
			c.mu.Unlock()
			cancel()
		}()
		var resp *jsonrpc.Response
		var params mcp.ElicitParams
		res, err := (*mcp.ElicitResult)(nil), json.Unmarshal(req.Params, &params)
		if err == nil {
			res, err = c.opts.OnElicit(ctx, &params)
		}
		if ctx.Err() != nil {
			return // cancelled: the server wants no answer
		}
		if err == nil {
			var raw []byte
			if raw, err = json.Marshal(res); err == nil {
				resp = &jsonrpc.Response{ID: req.ID, Result: raw}
			}
		}
		if err != nil {
			resp = &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}}
		}
		c.reply(req, resp)
	})
}

// encodeRequest is the frame of a call, or of a notification when id is
// the zero ID, with its newline. The params are encoded once, with the
// message: jsonrpc.EncodeMessage takes them encoded already and checks
// their text again (encoding/json compacts a RawMessage), which for a
// large argument (an upload's content) took three times as long as
// encoding it.
func encodeRequest(id jsonrpc.ID, method string, params any) ([]byte, error) {
	var frame bytes.Buffer
	err := json.NewEncoder(&frame).Encode(&struct { // with the newline
		JSONRPC string `json:"jsonrpc"`
		ID      any    `json:"id,omitempty"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", id.Raw(), method, params})
	return frame.Bytes(), err
}

// int64ID makes a JSON-RPC id the way the SDK decodes numbers, so that
// responses compare equal.
func int64ID(id int64) jsonrpc.ID {
	jid, _ := jsonrpc.MakeID(float64(id))
	return jid
}

func progressToken(id int64) string { return fmt.Sprintf("p%d", id) }
