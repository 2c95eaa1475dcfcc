package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/secrets"
)

const auditUsage = `Usage:
  actiongw audit verify [-config PATH]        check the audit log: every file, its
                                              head, and with the keyring its macs
                                              and checkpoint; say what that proves
  actiongw audit tail [-config PATH] [-n N] [-f]
                                              print the last N records (across
                                              rotated files); -f: and follow
  actiongw audit seal [-config PATH]          move a damaged audit log aside and
                                              start a new chain that names it
  actiongw audit recording [-config PATH] HANDLE
                                              print a finished terminal
                                              session's asciicast v2 recording
                                              (asciinema play FILE replays it)

The audit key and the checkpoint are read from the OS keyring (items
actiongw-audit-key and actiongw-audit-checkpoint-*); without them verify says
what it could not check.
`

func (c *cli) audit(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(c.stderr, auditUsage)
		return &usageError{"audit: no subcommand given"}
	}
	switch args[0] {
	case "verify":
		return c.auditVerify(ctx, args[1:])
	case "tail":
		return c.auditTail(ctx, args[1:])
	case "seal":
		return c.auditSeal(ctx, args[1:])
	case "recording":
		return c.auditRecording(args[1:])
	case "help", "-h", "-help", "--help":
		fmt.Fprint(c.stdout, auditUsage)
		return nil
	}
	return &usageError{fmt.Sprintf("audit: unknown subcommand %q (want verify, tail, seal or recording)", args[0])}
}

func (c *cli) auditVerify(ctx context.Context, args []string) error {
	fs := c.flags("audit verify", "audit verify [-config PATH]")
	cfg, err := c.parseConfig(fs, args)
	if err != nil {
		return err
	}
	opts, note := c.auditKeys(ctx, cfg.Server.StateDir)
	rep, err := audit.VerifyWith(ctx, audit.Path(cfg.Server.StateDir), opts)
	if note != "" {
		fmt.Fprintln(c.stdout, "keyring:", note)
	}
	var damage *audit.DamagedError
	if errors.As(err, &damage) && damage.LastSeq > 0 {
		fmt.Fprintf(c.stdout, "%s: good up to record %d; then:\n", audit.Path(cfg.Server.StateDir), damage.LastSeq)
	}
	if err != nil {
		return err
	}
	fmt.Fprint(c.stdout, rep)
	return nil
}

// auditKeys reads the audit key and the checkpoint of stateDir's log from
// the keyring. What it cannot read it leaves out, and says why in note.
func (c *cli) auditKeys(ctx context.Context, stateDir string) (opts audit.VerifyOptions, note string) {
	kr := c.keyring()
	var nf *secrets.NotFoundError
	key, err := kr.Get(ctx, audit.KeyName)
	switch {
	case errors.As(err, &nf):
		return opts, fmt.Sprintf("no audit key (item %s): serve has not run with this keyring, so the macs are not checked", audit.KeyName)
	case err != nil:
		return opts, fmt.Sprintf("not read (%v), so the macs are not checked", err)
	}
	opts.Key = key.Reveal()
	name := audit.CheckpointName(stateDir)
	v, err := kr.Get(ctx, name)
	switch {
	case errors.As(err, &nf):
		return opts, fmt.Sprintf("no checkpoint for this state directory (item %s)", name)
	case err != nil:
		return opts, fmt.Sprintf("checkpoint %s not read: %v", name, err)
	}
	var cp audit.Checkpoint
	if err := cp.UnmarshalText(v.Reveal()); err != nil {
		return opts, fmt.Sprintf("checkpoint %s unreadable: %v", name, err)
	}
	opts.Checkpoint = &cp
	return opts, ""
}

func (c *cli) auditSeal(ctx context.Context, args []string) error {
	fs := c.flags("audit seal", "audit seal [-config PATH]")
	cfg, err := c.parseConfig(fs, args)
	if err != nil {
		return err
	}
	opts, note := c.auditKeys(ctx, cfg.Server.StateDir)
	if note != "" {
		fmt.Fprintln(c.stdout, "keyring:", note)
	}
	res, err := audit.Seal(ctx, audit.Path(cfg.Server.StateDir), opts)
	if err != nil {
		return fmt.Errorf("audit seal: %w", err)
	}
	d := res.Damage
	where := d.File
	if d.Line > 0 {
		where = fmt.Sprintf("%s line %d", d.File, d.Line)
	}
	fmt.Fprintf(c.stdout, "damage: %s: %s\n", where, d.Reason)
	fmt.Fprintf(c.stdout, "moved the damaged log's files to %s (good up to record %d)\n", res.Dir, d.LastSeq)
	fmt.Fprintf(c.stdout, "started a new chain at %s with a seal record that names them\n", audit.Path(cfg.Server.StateDir))
	name := audit.CheckpointName(cfg.Server.StateDir)
	if res.Checkpoint != nil {
		text, _ := res.Checkpoint.MarshalText()
		err = c.keyring().Set(ctx, name, text)
	} else if opts.Checkpoint != nil {
		err = c.keyring().Delete(ctx, name)
	}
	if err != nil {
		return fmt.Errorf("audit seal: the log is sealed, but the keyring still holds the old chain's checkpoint (%s), which serve would take for a truncated log: %w", name, err)
	}
	fmt.Fprintln(c.stdout, "restart any actiongw serve that uses this state directory")
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
	return audit.Tail(ctx, audit.Path(cfg.Server.StateDir), *n, *follow, func(r *audit.Record, err error) error {
		if err != nil {
			fmt.Fprintf(c.stdout, "(unreadable) %v\n", err)
			return nil
		}
		fmt.Fprintln(c.stdout, formatAuditRecord(r))
		return nil
	})
}

// auditRecording prints the recording of a finished terminal session
// (the spool's stream "recording" of its handle), its JSON with every
// control character escaped: a recording holds what a remote program
// drew, which must not reach the person's terminal as codes.
func (c *cli) auditRecording(args []string) error {
	fs := c.flags("audit recording", "audit recording [-config PATH] HANDLE")
	configPath := configFlag(fs)
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &usageError{"audit recording: give the handle of an ssh_session_start"}
	}
	cfg, err := c.loadConfig(*configPath)
	if err != nil {
		return err
	}
	w := &controlEscaper{w: c.stdout}
	err = output.CopyFinished(filepath.Join(cfg.Server.StateDir, "spool"), fs.Arg(0), "recording", w, func(r output.ByteRange) {
		fmt.Fprintf(c.stderr, "actiongw: bytes %d to %d of the recording were not kept (retain_head_bytes, retain_tail_bytes)\n", r.Start, r.End)
	})
	if err != nil {
		return fmt.Errorf("audit recording: %w", err)
	}
	return nil
}

// controlEscaper writes JSON text with its C0 and C1 controls and DEL
// (which JSON strings may hold raw) as \u escapes; newlines stay.
type controlEscaper struct{ w io.Writer }

func (e *controlEscaper) Write(p []byte) (int, error) {
	n := len(p)
	var b strings.Builder
	for len(p) > 0 {
		r, n := utf8.DecodeRune(p)
		switch {
		case r == '\n':
			b.WriteByte('\n')
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.Write(p[:n])
		}
		p = p[n:]
	}
	_, err := io.WriteString(e.w, b.String())
	return n, err
}

// plainWord is v as it is when it is one word of printable ASCII, as a
// target's name is, else quoted in ASCII: the target of a fan-out is the
// agent's globs, which may hold terminal controls or a right-to-left
// override that would hide the line, or spaces that fake a field.
func plainWord(v string) string {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return strconv.QuoteToASCII(v)
		}
	}
	return v
}

// formatAuditRecord renders one record on one readable line.
func formatAuditRecord(r *audit.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s #%d %-7s %s %s handle=%s", r.Time.Format(time.RFC3339), r.Seq, r.Kind, r.Tool, plainWord(r.Target), r.Handle)
	add := func(k, v string) {
		if v == "" {
			return
		}
		// Quoted in ASCII: a character that prints but draws nothing
		// (a Hangul filler) would make two commands read the same.
		fmt.Fprintf(&b, " %s=%+q", k, v)
		if cut, ok := r.Cut[k]; ok {
			fmt.Fprintf(&b, "…(%d bytes, sha256 %.12s…)", cut.Bytes, cut.SHA256)
		}
	}
	add("command", r.Command)
	add("input", r.Input)
	add("keys", r.Keys)
	add("secret", r.Secret)
	// What else decides what ran: as root, where, with which variables,
	// from which earlier stream.
	if r.Sudo {
		b.WriteString(" sudo=true")
	}
	add("cwd", r.Cwd)
	add("env", r.Env)
	add("source", r.Source)
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
	for _, name := range slices.Sorted(maps.Keys(r.Streams)) {
		fmt.Fprintf(&b, " %s=%dB", name, r.Streams[name].Bytes)
	}
	if r.Kind == audit.KindOutcome {
		fmt.Fprintf(&b, " %dms", r.DurationMS)
	}
	add("reason", r.Reason)
	if r.RemoteStopped != nil {
		fmt.Fprintf(&b, " remote_stopped=%v", *r.RemoteStopped)
	}
	// A secret the target was never sent, back in its output: the agent
	// guessed it or found it there. Names only; the person looks why.
	add("secrets_seen", strings.Join(r.SecretsSeen, ","))
	if s := r.Sealed; s != nil {
		fmt.Fprintf(&b, " sealed=%s/%s line=%d last_seq=%d", s.Dir, s.File, s.Line, s.LastSeq)
	}
	return b.String()
}
