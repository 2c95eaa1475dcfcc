package main

import (
	"context"
	"fmt"
	"os"

	"github.com/actiongw/actiongw/cmd/actiongw/internal/tour"
)

// demo runs `actiongw demo`: the tour of the sandbox, driven over MCP.
func (c *cli) demo(ctx context.Context, args []string) error {
	fs := c.flags("demo", "demo")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo: finding this program: %w", err)
	}
	return tour.Run(ctx, tour.Options{Executable: exe, Version: version, Stdout: c.stdout, Stderr: c.stderr})
}
