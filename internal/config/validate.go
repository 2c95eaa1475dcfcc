package config

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/actiongw/actiongw/httpact"
	"github.com/actiongw/actiongw/secrets"
)

// Validate checks every field and returns all problems at once, each a
// *FieldError. It changes nothing: defaults come from Parse or
// SetDefaults.
//
// Each section has its own function, and the problems come in this
// order: [server], [audit], the [ssh.*] targets (validate_ssh.go),
// [approval], ssh_exec_many's max_parallel and the [group.*] sets, the
// [http.*] endpoints (validate_http.go); targets by name.
func (c *Config) Validate() error {
	var p problems
	c.Server.validate(&p)
	p.add(c.Audit.validate()...)
	for _, name := range slices.Sorted(maps.Keys(c.SSH)) {
		c.validateSSH(&p, name)
	}
	c.Approval.validate(&p)
	c.validateGroups(&p)
	for _, name := range slices.Sorted(maps.Keys(c.HTTP)) {
		c.validateHTTP(&p, name)
	}
	return errors.Join(p...)
}

// problems collects what Validate finds, in the order it finds it.
type problems []error

// bad adds a *FieldError on field.
func (p *problems) bad(field, format string, args ...any) {
	*p = append(*p, &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

func (p *problems) add(errs ...error) { *p = append(*p, errs...) }

// validate checks the [server] section but max_parallel, which
// validateGroups checks with the groups of ssh_exec_many.
func (s *Server) validate(p *problems) {
	if s.StateDir == "" {
		p.bad("server.state_dir", "must not be empty")
	}
	positive := []struct {
		name string
		v    int64
		min  int64
	}{
		{"server.max_frame_bytes", int64(s.MaxFrameBytes), 1024},
		{"server.result_bytes", int64(s.ResultBytes), 4096},
		{"server.max_concurrent_actions", int64(s.MaxConcurrentActions), 1},
		{"server.head_bytes", int64(s.HeadBytes), 0},
		{"server.tail_bytes", int64(s.TailBytes), 0},
		{"server.retain_head_bytes", s.RetainHeadBytes, 0},
		{"server.retain_tail_bytes", s.RetainTailBytes, 0},
		{"server.spool_max_bytes", s.SpoolMaxBytes, 0},
	}
	for _, l := range positive {
		if l.v < l.min {
			p.bad(l.name, "must be at least %d, got %d", l.min, l.v)
		}
	}
	if s.ResultBytes > s.MaxFrameBytes {
		p.bad("server.result_bytes", "must not exceed max_frame_bytes (%d), got %d", s.MaxFrameBytes, s.ResultBytes)
	}
	if s.SpoolTTL <= 0 {
		p.bad("server.spool_ttl", "must be positive, got %s", s.SpoolTTL)
	}
	if s.QueueWait <= 0 {
		p.bad("server.queue_wait", "must be positive, got %s", s.QueueWait)
	}
	if s.Wait < 0 {
		p.bad("server.wait", "must not be negative, got %s", s.Wait)
	}
	if s.MaxTerminalSessions < 0 {
		p.bad("server.max_terminal_sessions", "must not be negative, got %d", s.MaxTerminalSessions)
	}
	if s.MaxBackgroundActions < 0 {
		p.bad("server.max_background_actions", "must not be negative, got %d", s.MaxBackgroundActions)
	}
	if s.MaxConcurrentReads < 1 {
		p.bad("server.max_concurrent_reads", "must be at least 1, got %d", s.MaxConcurrentReads)
	}
	if s.AuditRotateBytes < 1<<20 {
		p.bad("server.audit_rotate_bytes", "must be at least 1 MiB, got %d", s.AuditRotateBytes)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, s.LogLevel) {
		p.bad("server.log_level", "must be debug, info, warn or error, got %q", s.LogLevel)
	}
}

// validate checks the [approval] section.
func (a *Approval) validate(p *problems) {
	if a.Timeout <= 0 {
		p.bad("approval.timeout", "must be more than zero, got %v", a.Timeout)
	}
	if a.Remember < 0 {
		p.bad("approval.remember", "must not be negative, got %v", a.Remember)
	}
	if a.Via != ViaClient && a.Via != ViaConsole && a.Via != ViaEither {
		p.bad("approval.via", "must be client, console or either, got %q", a.Via)
	}
}

// validateGroups checks what ssh_exec_many reads: server.max_parallel and
// the [group.*] sets of SSH targets.
func (c *Config) validateGroups(p *problems) {
	if c.Server.MaxParallel < 1 {
		p.bad("server.max_parallel", "must be at least 1, got %d", c.Server.MaxParallel)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Group)) {
		g, f := c.Group[name], "group."+name
		if err := checkTargetName(name); err != nil {
			p.bad(f, "%v", strings.Replace(err.Error(), "a target name", "a group name", 1))
		}
		if len(g.Targets) == 0 {
			p.bad(f+".targets", "must name at least one SSH target")
		} else if names, err := c.Targets(g.Targets); err != nil {
			p.bad(f+".targets", "%v", err)
		} else if len(names) > MaxGroupTargets {
			p.bad(f+".targets", "names %d targets; ssh_exec_many runs on at most %d", len(names), MaxGroupTargets)
		}
		p.add(checkNoInline(f, g.Description)...)
	}
}

// validate checks the [audit] section.
func (a *Audit) validate() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: "audit." + field, Reason: fmt.Sprintf(format, args...)})
	}
	// At least the largest record, with room to spare.
	if a.SyslogQueueBytes < 1<<20 {
		bad("syslog_queue_bytes", "must be at least 1 MiB, got %d", a.SyslogQueueBytes)
	}
	tlsOnly := []struct{ field, v string }{{"syslog_ca_file", a.SyslogCAFile}, {"syslog_server_name", a.SyslogServerName}}
	if a.Syslog == "" {
		for _, f := range tlsOnly {
			if f.v != "" {
				bad(f.field, `is used only with syslog = "tls://host:port", which is not set`)
			}
		}
		return errs
	}
	_, useTLS, err := a.SyslogAddr()
	switch {
	case err != nil:
		bad("syslog", "%v", err)
	case !useTLS:
		for _, f := range tlsOnly {
			if f.v != "" {
				bad(f.field, "is used only with tls://; syslog = %q sends in the clear", a.Syslog)
			}
		}
	case a.SyslogCAFile != "":
		if _, err := httpact.LoadCAFile(a.SyslogCAFile); err != nil {
			bad("syslog_ca_file", "%v", err)
		}
	}
	return errs
}

var targetName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func checkTargetName(name string) error {
	if !targetName.MatchString(name) {
		return errors.New("a target name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	return nil
}

// checkSecretNames rejects secret fields that hold something other than the
// name of a keyring item.
func checkSecretNames(prefix string, fields map[string]string) []error {
	var errs []error
	for _, field := range slices.Sorted(maps.Keys(fields)) {
		v := fields[field]
		if v == "" {
			continue
		}
		if looksInline(v) {
			errs = append(errs, &FieldError{Field: prefix + "." + field, Reason: "holds what looks like a credential; it must name a keyring item (store the value with `actiongw secret set NAME`)"})
			continue
		}
		if err := secrets.CheckUserName(v); err != nil {
			errs = append(errs, &FieldError{Field: prefix + "." + field, Reason: err.Error()})
		}
	}
	return errs
}

// checkNoInline rejects a PEM block or similar pasted into a plain field.
func checkNoInline(prefix string, values ...string) []error {
	for _, v := range values {
		if looksInline(v) {
			return []error{&FieldError{Field: prefix, Reason: "a value looks like an inline credential (a PEM block); credentials belong in the keyring (`actiongw secret set NAME`)"}}
		}
	}
	return nil
}

func looksInline(v string) bool {
	return strings.Contains(v, "-----BEGIN") || strings.Contains(v, "PRIVATE KEY")
}
