package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/demo"
	"github.com/actiongw/actiongw/internal/feed"
	"github.com/actiongw/actiongw/mcpserver"
)

// gcHeadroom is the size of an allocation serve holds and never touches.
// x/crypto/ssh allocates a fresh buffer for every packet it reads (about
// 1 GiB of garbage per GiB of output), and with the few MiB a server
// keeps live (about 6 MiB through a drain: mostly the packets the
// channel holds), the collector would run every few MiB. Counted as live
// heap, the headroom moves the collector's goal from about twice the live
// heap to twice the live heap plus twice the headroom. Its pages are never
// written, so they cost address space, not resident memory
// (TestServeHeadroomNotResident); the garbage it lets accumulate raises
// peak RSS by about its size. With 8 MiB a 1 GiB drain spends the same
// CPU per GB as with 16 MiB (at 4 MiB: about 130 collections per GiB,
// GODEBUG=gctrace=1, 5% of its CPU, and still the same CPU per GB), and
// peaks about 5 MiB lower (BenchmarkMCPSSHDrain, BenchmarkServeMemory).
//
// A memory limit (GOMEMLIMIT) would cap the heap instead of giving it a
// floor, and make the collector run without pause once the live heap
// nears the cap; the headroom keeps the default pacing above it.
const gcHeadroom = 8 << 20

// gcHeadroomSize is the headroom serve holds, and with it sets
// gcMemoryLimit: none when GOGC or GOMEMLIMIT is set. A person who sets them has taken charge of the collector and gets
// what they set; a memory limit would count the headroom as used, and a
// low GOGC collects early enough that the runtime may clear the headroom
// from reused pages, making it resident.
func gcHeadroomSize(getenv func(string) string) int {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return 0
	}
	return gcHeadroom
}

// gcMemoryLimit is the soft memory limit serve gives the runtime with the
// headroom (which it counts). Many actions at once keep more live: 50
// drains of 20 MB at once keep about 26 MiB live after a collection, and
// at the default pacing the heap grew to five times that (139 MiB peak RSS
// in BenchmarkServeMemory with a 224 MiB limit), against the 96 MiB we
// allow such a fan-out. With this limit they peak at about 85-90 MiB and
// collect 54 times instead of 36 in the same 5 s, with the collector at
// 5% (GODEBUG=gctrace=1): the live heap stays far below the limit, so the
// collector never runs without pause. Past the limit it runs more often,
// within the runtime's CPU cap for it; nothing fails. One drain stays far
// below it, so its pacing is the headroom's.
const gcMemoryLimit = 88 << 20

func (c *cli) serve(ctx context.Context, args []string) (err error) {
	// Allocated first, before the heap has freed any pages: the runtime
	// then takes it from fresh memory, known to be zero, and does not clear
	// it. (At the default GOGC no collection runs this early; one that did
	// could leave freed pages that the runtime would clear, writing them.)
	headroom := make([]byte, gcHeadroomSize(c.getenv))
	defer runtime.KeepAlive(headroom)
	if len(headroom) > 0 {
		debug.SetMemoryLimit(gcMemoryLimit)
	}
	fs := c.flags("serve", "serve [-config PATH | -demo]")
	configPath := configFlag(fs)
	demoMode := fs.Bool("demo", false, "serve the built-in sandbox (a loopback SSH server and HTTP API with in-memory credentials) instead of a config")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if *demoMode && *configPath != "" {
		return &usageError{"serve: -demo and -config are exclusive"}
	}
	if !*demoMode {
		path := *configPath
		if path == "" {
			path = config.DefaultPath(c.getenv)
		}
		// Watched from before the first load: an edit or a SIGHUP in
		// between is not lost.
		src := watchFrom(path)
		defer src.stop()
		// A config that does not load does not stop the server: a client
		// would show only "connection closed". Every tool answers with the
		// reason instead, until the file is fixed.
		cfg, err := c.loadConfig(path)
		level := "info"
		if err == nil {
			level = cfg.Server.LogLevel
		}
		logger := newLogger(c.stderr, level)
		return c.serveMCP(ctx, cfg, err, src, c.keyring(), logger)
	}
	logger := newLogger(c.stderr, "info")
	sb, err := demo.Start(ctx, logger)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer func() { err = errors.Join(err, sb.Close()) }()
	return c.serveMCP(ctx, sb.Config, nil, nil, sb.Secrets, logger)
}

// serveMCP serves one MCP session on stdin/stdout with a gateway over cfg
// (or, when cfgErr is set, over none yet) and store. With a config source,
// the config is loaded again on SIGHUP and when the file changes.
func (c *cli) serveMCP(ctx context.Context, cfg *config.Config, cfgErr error, src *configSource, store gateway.SecretStore, logger *slog.Logger) error {
	// From here on fd 1 is stderr: a stray print cannot corrupt the stream.
	out, err := mcpserver.TakeStdout()
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer out.Close()
	// A stdin whose blocked read a cancelled ctx can interrupt.
	in, err := mcpserver.TakeStdin()
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer in.Close()
	gw := gateway.New(ctx, gateway.Options{Config: cfg, ConfigError: cfgErr, Secrets: store, Logger: logger})
	// A signal stops running actions at once, with the signal as the reason.
	stop := context.AfterFunc(ctx, func() { gw.Shutdown(context.Cause(ctx)) })
	defer stop()
	stopWatch := func() {}
	if src != nil {
		stopWatch = c.watchConfig(ctx, src, gw, logger)
	}
	wire := cfg
	if cfg == nil {
		wire = config.Default() // the transport's limits, until a restart
	}
	console := listenConsole(cfg, gw, logger)
	logger.Info("serving MCP on stdio", "version", version, "ssh_targets", len(wire.SSH), "http_endpoints", len(wire.HTTP))
	err = mcpserver.Serve(ctx, in, out, mcpserver.Options{
		Config: wire, Logger: logger, Version: version, Gateway: gw,
		ActiveActions: func() int { return int(gw.ActiveActions()) },
		Initialized:   console.setClient,
	})
	if ctx.Err() != nil {
		// SIGTERM or SIGINT: a requested, clean shutdown, not a failure.
		logger.Info("shutting down on a signal", "cause", context.Cause(ctx).Error())
		err = nil
	}
	// Stdin EOF or a signal: no more reloads; cancel running actions and
	// record their outcomes.
	stopWatch()
	err = errors.Join(err, gw.Close())
	console.close()
	return err
}

// consoleFeed is serve's feed to the person's console, or nothing when
// its socket could not be opened (then serve goes on without).
type consoleFeed struct{ srv *feed.Server }

// listenConsole opens the console's socket in cfg's state directory
// (none without a configuration: [server] takes effect at a restart) and
// has gw tell it what its actions do.
func listenConsole(cfg *config.Config, gw *gateway.Gateway, logger *slog.Logger) consoleFeed {
	if cfg == nil {
		return consoleFeed{}
	}
	srv, err := feed.Listen(cfg.Server.StateDir, gw.FeedSource(), logger)
	if err != nil {
		logger.Warn("no console can follow this server", "error", err)
		return consoleFeed{}
	}
	gw.SetFeed(srv)
	return consoleFeed{srv}
}

func (c consoleFeed) setClient(name string) {
	if c.srv != nil {
		c.srv.SetClient(name)
	}
}

// close removes the socket, after the gateway closed: the consoles see
// the last actions end.
func (c consoleFeed) close() {
	if c.srv != nil {
		_ = c.srv.Close()
	}
}
