package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/mcpserver"
)

func (c *cli) serve(ctx context.Context, args []string) error {
	fs := c.flags("serve", "serve [-config PATH]")
	configPath := fs.String("config", "", "config file (default $ACTIONGW_CONFIG, else $XDG_CONFIG_HOME/actiongw/config.toml)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	cfg, err := c.loadConfig(*configPath)
	if err != nil {
		return err
	}
	// From here on fd 1 is stderr: a stray print cannot corrupt the stream.
	out, err := mcpserver.TakeStdout()
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer out.Close()
	logger := newLogger(c.stderr, cfg.Server.LogLevel)
	gw, err := gateway.New(ctx, gateway.Options{Config: cfg, Secrets: c.keyring(), Logger: logger})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	logger.Info("serving MCP on stdio", "version", version, "ssh_targets", len(cfg.SSH), "http_endpoints", len(cfg.HTTP))
	err = mcpserver.Serve(ctx, os.Stdin, out, mcpserver.Options{
		Config: cfg, Logger: logger, Version: version, Gateway: gw,
		ActiveActions: func() int { return int(gw.ActiveActions()) },
	})
	// Stdin EOF or a signal: cancel running actions and record their outcomes.
	return errors.Join(err, gw.Close())
}
