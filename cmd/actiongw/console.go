package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/console"
	"github.com/actiongw/actiongw/internal/feed"
)

// console serves the person's console for the config's state directory
// until ctx ends (Ctrl-C).
func (c *cli) console(ctx context.Context, args []string) error {
	fs := c.flags("console", "console [-config PATH] [-listen ADDR] [-open]")
	listen := fs.String("listen", console.DefaultListen, "loopback address and port to serve on (port 0: a free one)")
	open := fs.Bool("open", false, "open the login URL in the browser (xdg-open, open or start)")
	cfg, err := c.parseConfig(fs, args)
	if err != nil {
		return err
	}
	logger := newLogger(c.stderr, cfg.Server.LogLevel)
	ctx, cancel := context.WithCancel(ctx)
	w := feed.Watch(ctx, cfg.Server.StateDir)
	defer w.Wait()
	defer cancel()
	srv, err := console.Listen(console.Options{
		Listen: *listen, StateDir: cfg.Server.StateDir, Watcher: w, Logger: logger,
		VerifyOptions: func(ctx context.Context) (audit.VerifyOptions, string) {
			return c.auditKeys(ctx, cfg.Server.StateDir)
		},
	})
	var nl *console.NotLoopbackError
	if errors.As(err, &nl) {
		return &usageError{err.Error()}
	}
	if err != nil {
		return err
	}
	// Serves hand clients that can open addresses the page of their
	// question: the page without the token.
	w.SetPage(srv.Page())
	// The person's terminal, not MCP: the one place the token goes.
	fmt.Fprintf(c.stdout, "actiongw console for %s\nopen this URL once to log in (it works once; Ctrl-C stops the console):\n\n  %s\n\n", cfg.Server.StateDir, srv.LoginURL())
	if *open {
		if err := openBrowser(ctx, srv.LoginURL()); err != nil {
			logger.Warn("console: could not start the browser; open the URL yourself", "err", err)
		}
	}
	return srv.Serve(ctx)
}

// openBrowser starts the system's opener on url and waits for it (they
// hand the URL to the browser and return).
func openBrowser(ctx context.Context, url string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.CommandContext(ctx, "open", url)
	case "windows":
		cmd = exec.CommandContext(ctx, "cmd", "/c", "start", url)
	default:
		cmd = exec.CommandContext(ctx, "xdg-open", url)
	}
	return cmd.Run()
}
