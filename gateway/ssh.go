package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"path"
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
	var ask bool // a person is to approve the command
	return &action{
		intent: audit.Record{Tool: "ssh_exec", Target: in.Target, Command: in.Command},
		check: func(intent *audit.Record) error {
			// Sizes and bytes first: one call must not flood the audit
			// log, nor reach the connection with what makes sshd drop it.
			if len(in.Command) > st.maxCommand {
				return &unusableError{"max_command_bytes", "command too long",
					fmt.Errorf("the command is %d bytes; target %q accepts at most %d (max_command_bytes)", len(in.Command), in.Target, st.maxCommand)}
			}
			if strings.IndexByte(in.Command, 0) >= 0 {
				return &unusableError{"command", "NUL byte in the command", errors.New("the command contains a NUL byte, which no shell command can hold")}
			}
			listed, err := st.commands.Listed(in.Command)
			switch {
			case err != nil:
				return err
			case !listed && st.approve == config.ApproveNever:
				return st.commands.Check(in.Command) // the allow list's denial
			}
			ask = !listed || st.approve == config.ApproveAlways
			if in.Sudo && !st.allowSudo {
				return &policy.DeniedError{Target: in.Target, Rule: "allow_sudo", Reason: "sudo is not allowed on this target"}
			}
			intent.Sudo = in.Sudo
			if st.err != nil {
				return &unusableError{"credentials", st.err.Error(), st.err} // it names the target
			}
			if int64(len(in.Stdin)) > st.maxStdin {
				return &unusableError{"max_stdin_bytes", "stdin too large",
					fmt.Errorf("stdin is %d bytes; target %q accepts at most %d (max_stdin_bytes)", len(in.Stdin), in.Target, st.maxStdin)}
			}
			if dir, env, err = st.environment(in.Target, in.Cwd, in.Env); err != nil {
				return err
			}
			intent.Cwd, intent.Env = dir, envLines(env)
			return nil
		},
		approval: func() (*Question, string) {
			if !ask {
				return nil, ""
			}
			return g.commandQuestion(cfg, st.where, in, dir, env), ruleApprove
		},
		asked: seconds(in.TimeoutS), timeout: st.timeout, maxTimeout: st.maxTimeout,
		reserve: g.reserveSession(st, &lease),
		streams: []string{"stdout", "stderr"},
		execute: func(ctx context.Context, w []io.Writer, _ *atomic.Int64) *ended {
			req := sshexec.Request{Command: in.Command, Dir: dir, Env: env, OutputLimit: st.outputLimit, Stdout: w[0], Stderr: w[1],
				Sudo: in.Sudo, SudoPassword: st.sudoPassword}
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

// environment returns the directory and the variables a call's command
// runs with: the call's cwd, else the target's, as allow_cwd lets it be
// (policy decides and cleans it, or denies); the target's env with the
// call's on top. The call may set only the names allow_env allows (a
// denial); sizes and bytes are bounded as in the config.
func (st *sshTarget) environment(target, cwd string, callEnv map[string]string) (string, map[string]string, error) {
	if len(cwd) > config.MaxCwdBytes || strings.IndexByte(cwd, 0) >= 0 {
		return "", nil, &unusableError{"cwd", "cwd too long or with a NUL byte",
			fmt.Errorf("cwd must be at most %d bytes, with no NUL byte", config.MaxCwdBytes)}
	}
	if cwd == "" {
		cwd = st.cwd
	}
	cwd, err := st.dirs.Check(cwd)
	if err != nil {
		return "", nil, err
	}
	if len(callEnv) == 0 {
		return cwd, st.env, nil
	}
	env := maps.Clone(st.env)
	if env == nil {
		env = map[string]string{}
	}
	for _, name := range slices.Sorted(maps.Keys(callEnv)) {
		v := callEnv[name]
		switch {
		case !sshexec.SettableEnv(name):
			return "", nil, &unusableError{"env", "bad variable name",
				fmt.Errorf("env: %q is not a variable name that can be set (%s)", output.Clip(name, 64), sshexec.EnvNameRule)}
		case !slices.ContainsFunc(st.allowEnv, func(p string) bool { ok, _ := path.Match(p, name); return ok }):
			return "", nil, &policy.DeniedError{Target: target, Rule: "allow_env",
				Reason: fmt.Sprintf("env %s is not among the variables a call may set (allow_env %q): a variable can change what a command does", output.Clip(name, 64), st.allowEnv)}
		case len(v) > config.MaxEnvValueBytes || strings.IndexByte(v, 0) >= 0:
			return "", nil, &unusableError{"env", "env value too long or with a NUL byte",
				fmt.Errorf("env %s: the value must be at most %d bytes, with no NUL byte", name, config.MaxEnvValueBytes)}
		}
		env[name] = v
	}
	if len(env) > config.MaxEnv {
		return "", nil, &unusableError{"env", "too many variables", fmt.Errorf("env: at most %d variables, with the target's, got %d", config.MaxEnv, len(env))}
	}
	return cwd, env, nil
}

// envLines renders env for the audit log: NAME=value, one a line, sorted.
func envLines(env map[string]string) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(&b, "%s=%s\n", name, env[name])
	}
	return b.String()
}
