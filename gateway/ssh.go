package gateway

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/policy"
	"github.com/actiongw/actiongw/sshexec"
)

// SSHExecInput is the input of the ssh_exec tool.
type SSHExecInput struct {
	Target   string            `json:"target" jsonschema:"name of an SSH target, as list_targets gives it"`
	Command  string            `json:"command" jsonschema:"shell command to run on the target"`
	Stdin    string            `json:"stdin,omitempty" jsonschema:"text sent to the command's standard input, then end of file"`
	TimeoutS float64           `json:"timeout_s,omitempty" jsonschema:"seconds after which the command is stopped; capped by the target's maximum"`
	Sudo     bool              `json:"sudo,omitempty" jsonschema:"run the command as root with sudo; only on targets with allow_sudo (the password comes from the keyring)"`
	Cwd      string            `json:"cwd,omitempty" jsonschema:"directory to run the command in (default: the target's, else the login directory); an absolute one the target's allow_cwd lists, when it sets that"`
	Env      map[string]string `json:"env,omitempty" jsonschema:"environment variables for the command; only the names the target's allow_env lists"`
	WaitS    *float64          `json:"wait_s,omitempty" jsonschema:"seconds this call waits for the command to end (default: the server's wait, 50 s); still running then, it is returned as running with its handle and goes on in the background; 0 starts it in the background"`
}

// SSHExecOutput is the structured result of ssh_exec.
type SSHExecOutput struct {
	Handle string `json:"handle"`
	Target string `json:"target"`
	// Status is running, exited, signaled, timeout, cancelled,
	// output_limit or failed.
	Status     Status        `json:"status"`
	ExitCode   *int          `json:"exit_code,omitempty"`
	Signal     string        `json:"signal,omitempty"`
	DurationMS int64         `json:"duration_ms"`
	Stdout     output.Stream `json:"stdout"`
	Stderr     output.Stream `json:"stderr"`
	// RemoteStopped is set when the command had to be stopped: true only
	// when its processes were verified gone.
	RemoteStopped *bool  `json:"remote_stopped,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// sshStatus maps how sshexec says a run ended; sshexec decides timeout
// against cancelled, and the gateway keeps its word.
var sshStatus = map[sshexec.Status]Status{
	sshexec.StatusExited:      StatusExited,
	sshexec.StatusSignaled:    StatusSignaled,
	sshexec.StatusTimeout:     StatusTimeout,
	sshexec.StatusCancelled:   StatusCancelled,
	sshexec.StatusOutputLimit: StatusOutputLimit,
	sshexec.StatusFailed:      StatusFailed,
}

// SSHExec runs one command on a configured SSH target.
func (g *Gateway) SSHExec(ctx context.Context, in SSHExecInput, progress Progress) *ToolResult {
	s, st, fail := g.sshTarget(ctx, in.Target)
	if fail != nil {
		return fail
	}
	return g.run(ctx, s, g.sshExecAction(s.cfg, st, in), progress, in.WaitS)
}

// sshExecAction is the action of one ssh_exec call on st.
func (g *Gateway) sshExecAction(cfg *config.Config, st *sshTarget, in SSHExecInput) *action {
	var lease *sshexec.Lease
	var dir string
	var env map[string]string
	var sudo bool
	var outputLimit int64
	return &action{
		intent: audit.Record{Tool: "ssh_exec", Target: in.Target, Command: in.Command},
		check: func(intent *audit.Record) (policy.Decision, error) {
			d := st.rules.Decide(policy.Command{Command: in.Command, Stdin: int64(len(in.Stdin)), Sudo: in.Sudo,
				Cwd: in.Cwd, Env: in.Env, Timeout: seconds(in.TimeoutS)})
			if err := firstError(d.Err, d.SudoErr); err != nil {
				return d, err
			}
			intent.Sudo = in.Sudo
			if err := st.ready(nil); err != nil {
				return d, err
			}
			if err := firstError(d.StdinErr, d.DirErr, d.EnvErr); err != nil {
				return d, err
			}
			dir, env, sudo, outputLimit = d.Dir, d.Env, d.Sudo, d.OutputLimit
			intent.Cwd, intent.Env = dir, envLines(env)
			return d, nil
		},
		approval: func() *Question {
			return g.commandQuestion(cfg, st.where, in, dir, env)
		},
		reserve: g.reserveSession(st, &lease),
		streams: []string{"stdout", "stderr"},
		execute: func(ctx context.Context, w []io.Writer, _ *atomic.Int64) *ended {
			req := sshexec.Request{Command: in.Command, Dir: dir, Env: env, OutputLimit: outputLimit, Stdout: w[0], Stderr: w[1],
				Sudo: sudo, SudoPassword: st.sudoPassword}
			if in.Stdin != "" {
				req.Stdin = []byte(in.Stdin)
			}
			res, err := lease.Run(ctx, req)
			if err != nil {
				return &ended{status: StatusFailed, reason: err.Error()}
			}
			e := &ended{status: sshStatus[res.Status], reason: res.Reason, duration: res.Duration,
				exitCode: res.ExitCode, signal: res.Signal, remoteStopped: res.RemoteStopped}
			if res.Unverified != "" {
				e.reason = strings.TrimSpace(e.reason + "; not verified stopped: " + res.Unverified)
			}
			return e
		},
		finish: func(e *ended, handle string, s []output.Stream) (any, []output.NamedStream, string, bool) {
			out := &SSHExecOutput{Handle: handle, Target: in.Target, Status: e.status, ExitCode: e.exitCode, Signal: e.signal,
				DurationMS: e.duration.Milliseconds(), Stdout: s[0], Stderr: s[1], RemoteStopped: e.remoteStopped, Reason: e.reason}
			isError := out.Status != StatusExited || out.ExitCode == nil || *out.ExitCode != 0
			if in.Sudo && isError && strings.Contains(s[1].Head+s[1].Tail, "incorrect password") {
				out.Reason = joinReason(out.Reason, fmt.Sprintf("sudo refused the password of keyring item %q (sudo_secret of %s): store the right one with: actiongw secret set %s", st.sudoSecret, in.Target, st.sudoSecret))
			}
			return out, []output.NamedStream{{Name: "stdout", Summary: &out.Stdout}, {Name: "stderr", Summary: &out.Stderr}},
				describeSSH(out, g.redactString(in.Command)), isError
		},
	}
}

// sshTarget returns the current state and its SSH target name, or the
// failure that says why there is none.
func (g *Gateway) sshTarget(ctx context.Context, name string) (*state, *sshTarget, *ToolResult) {
	s, fail := g.ready()
	if fail != nil {
		return nil, nil, fail
	}
	st, ok := s.ssh[name]
	if ok && st.err != nil {
		// A reload may have changed or removed the target meanwhile.
		s = g.refreshed(ctx, s)
		st, ok = s.ssh[name]
	}
	if !ok {
		_, isHTTP := s.http[name]
		known := slices.DeleteFunc(names(s.ssh), func(n string) bool { return s.cfg.SSH[n].JumpOnly }) // as list_targets lists them
		return nil, nil, g.failure("%s", unknownTarget("SSH target", name, known, isHTTP, "http_request", "endpoint"))
	}
	if s.cfg.SSH[name].JumpOnly {
		return nil, nil, g.failure("SSH target %q is a jump host only (jump_only): other targets connect through it, and no command or file transfer runs on it", name)
	}
	return s, st, nil
}

// reserveSession is an action's reserve for one SSH session of st, which
// it leases into *lease.
func (g *Gateway) reserveSession(st *sshTarget, lease **sshexec.Lease) func(ctx context.Context, wait time.Duration) (func(), error) {
	return func(ctx context.Context, wait time.Duration) (func(), error) {
		l, err := g.ssh.Acquire(ctx, st.target, wait)
		if err != nil {
			return nil, err
		}
		*lease = l
		return l.Release, nil // once the lease is used, a no-op
	}
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

// describeSSH says in words what ran and how it ended.
func describeSSH(out *SSHExecOutput, command string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ssh_exec %q on %s: %s", output.Clip(command, 200), out.Target, out.Status)
	switch {
	case out.ExitCode != nil:
		fmt.Fprintf(&b, " with exit code %d", *out.ExitCode)
	case out.Signal != "":
		fmt.Fprintf(&b, " by signal %s", out.Signal)
	}
	fmt.Fprintf(&b, " after %d ms.", out.DurationMS)
	if out.Reason != "" {
		fmt.Fprintf(&b, " Reason: %s.", out.Reason)
	}
	if out.RemoteStopped != nil {
		if *out.RemoteStopped {
			b.WriteString(" The remote command was stopped and verified gone.")
		} else {
			b.WriteString(" The remote command could NOT be verified stopped.")
		}
	}
	return b.String()
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
