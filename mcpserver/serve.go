package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/mcpserver/internal/wire"
)

// Options configures one MCP session.
type Options struct {
	// Config gives the targets list_targets shows and the wire limit
	// (Server.MaxFrameBytes). Nil means config.Default().
	Config *config.Config
	// Logger receives the transport's and the tools' logs; nil discards them.
	Logger *slog.Logger
	// Version is reported to the host and by the health tool.
	Version string
	// ActiveActions, if set, reports the number of actions running, for the
	// health tool; nil reports zero.
	ActiveActions func() int
	// Gateway runs the action tools (ssh_exec, http_request, read_output,
	// search_output); nil serves only list_targets and health.
	Gateway *gateway.Gateway
	// Initialized, if set, is called with the client's name (from its
	// initialize request) once the session is initialized.
	Initialized func(client string)
}

// Serve runs one MCP session on in/out until in reaches EOF or ctx ends.
// It returns nil at EOF, the cause of ctx at cancellation, and otherwise
// the error that broke the stream (such as a failed write to out).
//
// Interrupting a blocked read or write on cancellation needs in and out to
// support deadlines (as the files from TakeStdin and TakeStdout do); other
// streams are waited for.
func Serve(ctx context.Context, in io.Reader, out io.Writer, opts Options) error {
	cfg := opts.Config
	if cfg == nil {
		cfg = config.Default()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	limit := cfg.Server.MaxFrameBytes
	env := &toolEnv{
		cfg:         cfg,
		log:         log,
		version:     opts.Version,
		start:       time.Now(),
		metrics:     &wire.Metrics{},
		active:      opts.ActiveActions,
		gw:          opts.Gateway,
		approvals:   newApprovals(),
		initialized: opts.Initialized,
	}
	c := newConn(in, out, limit, env.metrics, log)
	env.approvals.asking = c.asking
	defer env.approvals.close()
	server := newServer(env)
	ss, err := server.Connect(ctx, c, nil)
	if err != nil {
		c.abort(err)
		c.shutdown()
		return fmt.Errorf("starting MCP session: %w", err)
	}

	// The watcher is owned here: it ends when ctx does or the session does.
	sessionDone := make(chan struct{})
	watcherDone := make(chan struct{})
	go func() {
		defer close(watcherDone)
		select {
		case <-ctx.Done():
			c.abort(context.Cause(ctx))
		case <-sessionDone:
		}
	}()
	waitErr := ss.Wait()
	close(sessionDone)
	<-watcherDone
	c.shutdown()

	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case c.writeErr != nil:
		return c.writeErr
	case waitErr != nil && !errors.Is(waitErr, io.EOF):
		return waitErr
	}
	return nil
}

// newServer builds the SDK server with every registered tool set.
func newServer(env *toolEnv) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "actiongw", Version: env.version}, &mcp.ServerOptions{
		Logger:             env.log,
		InitializedHandler: env.onInitialized,
		Instructions: "actiongw runs SSH commands and HTTP calls on targets a person configured; " +
			"call list_targets first. Large outputs come back as a preview and a handle for read_output.",
	})
	for _, add := range toolSets {
		add(s, env)
	}
	var mw []mcp.Middleware
	if env.gw != nil {
		mw = append(mw, env.withNote)
	}
	s.AddReceivingMiddleware(append(mw, env.fitErrors)...)
	return s
}

// fitErrors cuts the text of a tool call's error to fit result_bytes. The
// SDK refuses an unknown tool, and arguments its schema refuses (an
// unknown property, a value outside an enum), quoting the name or value
// whole, whatever its size.
func (env *toolEnv) fitErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "tools/call" {
			return res, err
		}
		limit := env.cfg.Server.ResultBytes
		var we *jsonrpc.Error
		if errors.As(err, &we) {
			we.Message = output.FitText(we.Message, limit)
		}
		if r, ok := res.(*mcp.CallToolResult); ok && r != nil && r.IsError {
			for _, c := range r.Content {
				if t, ok := c.(*mcp.TextContent); ok {
					t.Text = output.FitText(t.Text, limit)
				}
			}
		}
		return res, err
	}
}

// withNote puts what the gateway has to tell about its configuration (a
// reload that failed or needs a restart) at the start of the next tool
// result's text, when it fits within result_bytes; else a later result
// carries it.
func (env *toolEnv) withNote(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		r, ok := res.(*mcp.CallToolResult)
		if !ok || err != nil || len(r.Content) == 0 {
			return res, err
		}
		text, ok := r.Content[0].(*mcp.TextContent)
		if !ok {
			return res, err
		}
		size := func() int {
			b, err := json.Marshal(r)
			if err != nil {
				return math.MaxInt32 // no room
			}
			return len(b)
		}
		if note := env.gw.TakeNote(size); note != "" {
			text.Text = note + "\n\n" + text.Text
		}
		return res, err
	}
}
