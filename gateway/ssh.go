package gateway

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/policy"
	"github.com/actiongw/actiongw/sshexec"
)

// What the SSH tools share: finding the target, leasing a session, the
// target's rules.

// sshTarget returns the current state and its SSH target name, or the
// failure that says why there is none.
func (g *Gateway) sshTarget(ctx context.Context, name string) (*state, *sshTarget, *ToolResult) {
	s, fail := g.lookup(ctx, name, true)
	if fail != nil {
		return nil, nil, fail
	}
	if s.cfg.SSH[name].JumpOnly {
		return nil, nil, g.failure("SSH target %q is a jump host only (jump_only): other targets connect through it, and no command or file transfer runs on it", name)
	}
	return s, s.ssh[name], nil
}

// lookup returns the state a call on name, an SSH target (ssh) or an HTTP
// endpoint, is to run under: the current one, or, when name's secret did
// not load, the one after reading the keyring again (a reload may have
// changed or removed it meanwhile). When name is none, it returns the
// failure that says what to call instead.
func (g *Gateway) lookup(ctx context.Context, name string, ssh bool) (*state, *ToolResult) {
	s, fail := g.ready()
	if fail != nil {
		return nil, fail
	}
	err, ok := s.targetErr(name, ssh)
	if ok && err != nil {
		s = g.refreshed(ctx, s)
		_, ok = s.targetErr(name, ssh)
	}
	if ok {
		return s, nil
	}
	if ssh {
		_, isHTTP := s.http[name]
		known := slices.DeleteFunc(slices.Sorted(maps.Keys(s.ssh)), func(n string) bool { return s.cfg.SSH[n].JumpOnly }) // as list_targets lists them
		return nil, g.failure("%s", unknownTarget("SSH target", name, known, isHTTP, "http_request", "endpoint"))
	}
	_, isSSH := s.ssh[name]
	return nil, g.failure("%s", unknownTarget("HTTP endpoint", name, slices.Sorted(maps.Keys(s.http)), isSSH, "ssh_exec", "target"))
}

// targetErr returns why the target or endpoint name cannot be used (nil:
// it can), and whether s has it.
func (s *state) targetErr(name string, ssh bool) (error, bool) {
	if ssh {
		st, ok := s.ssh[name]
		if !ok {
			return nil, false
		}
		return st.err, true
	}
	he, ok := s.http[name]
	if !ok {
		return nil, false
	}
	return he.err, true
}

// ready returns refusal, policy's, or when there is none and the target
// cannot be used, why.
func (st *sshTarget) ready(refusal error) error {
	if refusal == nil && st.err != nil {
		return &unusableError{"credentials", st.err.Error(), st.err} // it names the target
	}
	return refusal
}

// session is the SSH session a kind of action leases from its target
// before it starts: it is the kind's reserve (see reserver).
type session struct {
	pool   *sshexec.Pool
	target *sshexec.Target
	lease  *sshexec.Lease
	// intent is the action's, whose handle names the certificate of a CA
	// target, and serial that certificate's serial (see name).
	intent *audit.Record
	serial uint64
}

// name records, for a CA target, the serial of the action's certificate
// in its intent; the key id is the handle, which the intent gets later.
// A kind's check calls it.
func (s *session) name(intent *audit.Record) {
	if s.target != nil && s.target.Auth.CA != nil {
		s.intent, s.serial = intent, sshexec.NewSerial()
		intent.CertSerial = strconv.FormatUint(s.serial, 10)
	}
}

// leased is the reserved lease, its certificate (on a CA target) named
// after the action's handle: what execute uses.
func (s *session) leased() *sshexec.Lease {
	if s.intent != nil {
		s.lease.Certify(s.intent.Handle, s.serial)
	}
	return s.lease
}

func (s *session) reserve(ctx context.Context, wait time.Duration) (func(), error) {
	l, err := s.pool.Acquire(ctx, s.target, wait)
	if err != nil {
		return nil, err
	}
	s.lease = l
	return l.Release, nil // once the lease is used, a no-op
}

// sshRules are the rules of target name, configured as c: its patterns
// compiled (Validate compiled them once: this cannot fail), and the
// remote wrapper's rule for the names of variables.
func sshRules(name string, c *config.SSHTarget) (*policy.SSH, error) {
	commands, err := policy.CompileCommands(name, c.AllowCommands, c.DenyCommands)
	return &policy.SSH{Target: name, Commands: commands, Approve: c.Approve, AllowSudo: c.AllowSudo,
		MaxCommand: c.MaxCommandBytes, MaxStdin: c.MaxStdinBytes,
		Cwd: c.Cwd, Dirs: &policy.Dirs{Target: name, Allow: c.AllowCwd}, Env: c.Env, AllowEnv: c.AllowEnv,
		SettableEnv: sshexec.SettableEnv, EnvNameRule: sshexec.EnvNameRule,
		Timeout: c.Timeout, MaxTimeout: c.MaxTimeout, OutputLimit: c.OutputLimit,
		Paths: &policy.Paths{Target: name, Allow: c.AllowPaths, Deny: c.DenyPaths}, MaxUpload: c.MaxUploadBytes, MaxDownload: c.MaxDownloadBytes}, err
}

// seconds turns an agent's seconds into a duration: 0 for none or less,
// saturated rather than overflowed for a huge one.
func seconds(s float64) time.Duration {
	switch {
	case s <= 0:
		return 0
	case s >= float64(math.MaxInt64)/float64(time.Second):
		return math.MaxInt64
	}
	return time.Duration(s * float64(time.Second))
}

// firstError is the first of errs that is not nil.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// envLines renders env for the audit log: NAME=value, one a line, sorted.
func envLines(env map[string]string) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(&b, "%s=%s\n", name, env[name])
	}
	return b.String()
}

// joinReason joins two parts of a reason, either of which may be empty.
func joinReason(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
