package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
)

func (c *cli) audit(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return &usageError{"audit: want verify or tail"}
	}
	switch args[0] {
	case "verify":
		return c.auditVerify(args[1:])
	case "tail":
		return c.auditTail(ctx, args[1:])
	}
	return &usageError{fmt.Sprintf("audit: unknown subcommand %q (want verify or tail)", args[0])}
}

func (c *cli) auditVerify(args []string) error {
	fs := c.flags("audit verify", "audit verify [-config PATH]")
	cfg, err := c.parseConfig(fs, args)
	if err != nil {
		return err
	}
	path := audit.Path(cfg.Server.StateDir)
	n, err := audit.Verify(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	fmt.Fprintf(c.stdout, "%s: %d records, chain intact\n", path, n)
	return nil
}

func (c *cli) auditTail(ctx context.Context, args []string) error {
	fs := c.flags("audit tail", "audit tail [-config PATH] [-n N] [-f]")
	n := fs.Int("n", 20, "number of records to print")
	follow := fs.Bool("f", false, "keep printing records as they are appended")
	cfg, err := c.parseConfig(fs, args)
	if err != nil {
		return err
	}
	f, err := os.Open(audit.Path(cfg.Server.StateDir))
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var last []string
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		last = append(last, line)
		if len(last) > *n {
			last = last[1:]
		}
	}
	for _, l := range last {
		fmt.Fprintln(c.stdout, formatAuditLine(l))
	}
	if !*follow {
		return nil
	}
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	var partial string
	for {
		line, err := r.ReadString('\n')
		switch {
		case err == nil:
			fmt.Fprintln(c.stdout, formatAuditLine(partial+line))
			partial = ""
			continue
		case err != io.EOF:
			return err
		}
		partial += line
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// formatAuditLine renders one record on one readable line.
func formatAuditLine(line string) string {
	var r audit.Record
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return "(unreadable record) " + strings.TrimSpace(line)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s #%d %-7s %s %s handle=%s", r.Time.Format(time.RFC3339), r.Seq, r.Kind, r.Tool, r.Target, r.Handle)
	add := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, " %s=%q", k, v)
		}
	}
	add("command", r.Command)
	add("method", r.Method)
	add("path", r.Path)
	add("decision", r.Decision)
	add("rule", r.Rule)
	add("status", r.Status)
	if r.ExitCode != nil {
		fmt.Fprintf(&b, " exit=%d", *r.ExitCode)
	}
	add("signal", r.Signal)
	if r.HTTPStatus != 0 {
		fmt.Fprintf(&b, " http=%d", r.HTTPStatus)
	}
	for name, s := range r.Streams {
		fmt.Fprintf(&b, " %s=%dB", name, s.Bytes)
	}
	if r.Kind == "outcome" {
		fmt.Fprintf(&b, " %dms", r.DurationMS)
	}
	add("reason", r.Reason)
	if r.RemoteStopped != nil {
		fmt.Fprintf(&b, " remote_stopped=%v", *r.RemoteStopped)
	}
	return b.String()
}
