package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/config"
)

// check validates the config and reports, one row per item, what is wrong.
func (c *cli) check(ctx context.Context, args []string) error {
	fs := c.flags("check", "check [-config PATH]")
	cfg, err := c.parseConfig(fs, args)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ITEM\tSTATUS\tDETAIL")
	fmt.Fprintf(tw, "config\tok\t%d ssh target(s), %d http endpoint(s)\n", len(cfg.SSH), len(cfg.HTTP))
	failed := 0
	for _, r := range c.checkRows(ctx, cfg) {
		status := "ok"
		if r.err != nil {
			status, failed = "FAIL", failed+1
		}
		detail := r.detail
		if r.err != nil {
			detail = r.err.Error()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.item, status, detail)
	}
	tw.Flush()
	if failed > 0 {
		return fmt.Errorf("check: %d problem(s) found", failed)
	}
	return nil
}

type checkRow struct {
	item   string
	detail string
	err    error
}

// checkRows checks every referenced secret, then every target as a call
// would use it: SSH targets are dialled, their host keys verified and the
// login tried.
func (c *cli) checkRows(ctx context.Context, cfg *config.Config) []checkRow {
	var rows []checkRow
	kr := c.keyring()
	names := cfg.SecretNames()
	problems, err := lookupSecrets(ctx, kr, names)
	if err != nil {
		// The keyring as a whole failed: one row says why, and the targets
		// that need secrets fail below with the same error.
		rows = append(rows, checkRow{item: "keyring", err: err})
	}
	for _, name := range names {
		if err != nil {
			break
		}
		row := checkRow{item: "secret " + name, detail: "present in the keyring", err: problems[name]}
		rows = append(rows, row)
	}
	log := newLogger(c.stderr, "error")
	for _, tc := range gateway.CheckTargets(ctx, cfg, kr, log, 15*time.Second) {
		rows = append(rows, checkRow{item: tc.Kind + " " + tc.Name, detail: tc.Detail, err: tc.Err})
	}
	return rows
}
