package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/policy"
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
	failed, warned := 0, 0
	for _, r := range c.checkRows(ctx, cfg) {
		status := "ok"
		switch {
		case r.err != nil:
			status, failed = "FAIL", failed+1
		case r.warn:
			status, warned = "WARN", warned+1
		}
		detail := r.detail
		if r.err != nil {
			detail = r.err.Error()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.item, status, detail)
	}
	tw.Flush()
	if warned > 0 {
		fmt.Fprintf(c.stdout, "%d warning(s): what a WARN row names works, with the risk it says\n", warned)
	}
	if failed > 0 {
		return fmt.Errorf("check: %d problem(s) found", failed)
	}
	return nil
}

type checkRow struct {
	item   string
	detail string
	err    error
	// warn marks a risk found (detail says which), not a failure: it
	// leaves the exit status alone.
	warn bool
}

// checkRows warns about relative programs a call's cwd can pick
// (cwdRows), checks every referenced secret (there, missing or too short;
// guessable, a warning), then every target as a call would use it: SSH
// targets are dialled, their host keys verified and the login tried.
func (c *cli) checkRows(ctx context.Context, cfg *config.Config) []checkRow {
	rows := cwdRows(cfg)
	kr := c.keyring()
	names := cfg.SecretNames()
	problems, err := lookupSecrets(ctx, kr, names, cfg.GuessableSecrets())
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
		var weak *weakSecretError
		if errors.As(row.err, &weak) {
			row.err, row.detail, row.warn = nil, weak.Error(), true // it works
		}
		rows = append(rows, row)
	}
	log := newLogger(c.stderr, "error")
	for _, tc := range gateway.CheckTargets(ctx, cfg, kr, log, 15*time.Second) {
		rows = append(rows, checkRow{item: tc.Kind + " " + tc.Name, detail: tc.Detail, err: tc.Err})
	}
	return rows
}

// cwdRows warns about every allow_commands pattern that runs a relative
// program (policy.RelativeProgram) where a call can pick the directory,
// and so the file: any directory (no allow_cwd), or one that allow_cwd
// allows and ssh_upload may write into (allow_paths).
func cwdRows(cfg *config.Config) []checkRow {
	var rows []checkRow
	for _, name := range slices.Sorted(maps.Keys(cfg.SSH)) {
		t := cfg.SSH[name]
		if t.JumpOnly {
			continue // no command runs on it
		}
		for i, p := range t.AllowCommands {
			prog, ok := policy.RelativeProgram(p)
			if !ok {
				continue
			}
			detail := fmt.Sprintf("allow_commands[%d] %q runs a relative program (%s)", i, p, prog)
			dirs := &policy.Dirs{Allow: t.AllowCwd}
			if len(t.AllowCwd) == 0 {
				detail += ", and no allow_cwd limits the directory: a call's cwd picks which file runs, one the agent uploaded included; set allow_cwd to the directories where it may run"
			} else if c, f, ok := dirs.Writable(&policy.Paths{Allow: t.AllowPaths}); ok {
				detail += fmt.Sprintf(", and allow_cwd %q covers a directory that allow_paths %q lets ssh_upload write into: a file the agent uploads there can be what runs; keep the two apart", c, f)
			} else {
				continue
			}
			rows = append(rows, checkRow{item: "ssh " + name, detail: detail, warn: true})
		}
	}
	return rows
}
