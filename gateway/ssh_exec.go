package gateway

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/policy"
	"github.com/actiongw/actiongw/sshexec"
)

// SSHExecTool is the ssh_exec tool.
var SSHExecTool = &Tool[SSHExecInput, *SSHExecOutput]{
	Name: "ssh_exec",
	Description: "Run a shell command on a configured SSH target (see list_targets). Returns status, exit code, " +
		"byte and line counts, and the first and last lines of stdout and stderr (in the text and in " +
		"structuredContent), with a handle: use read_output and search_output with it for the rest. " +
		"Credentials are injected by the server and never shown.",
	Hints: Hints{OpenWorld: true, Destructive: true},
	Asks:  true,
	Call:  (*Gateway).SSHExec,
}

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

// SSHExec runs one command on a configured SSH target.
func (g *Gateway) SSHExec(ctx context.Context, in SSHExecInput, progress Progress) *ToolResult {
	s, st, fail := g.sshTarget(ctx, in.Target)
	if fail != nil {
		return fail
	}
	return g.run(ctx, s, g.sshExecAction(s.cfg, st, in), progress, in.WaitS)
}

// sshExecAction is the action of one ssh_exec call on st, under cfg.
func (g *Gateway) sshExecAction(cfg *config.Config, st *sshTarget, in SSHExecInput) *action {
	return &action{kind: &sshExec{session: session{pool: g.ssh, target: st.target}, g: g, cfg: cfg, st: st, in: in},
		intent: audit.Record{Tool: "ssh_exec", Target: in.Target, Command: in.Command}}
}

// sshExec is one ssh_exec call: a command on an SSH target, in a session
// of its own.
type sshExec struct {
	session
	g   *Gateway
	cfg *config.Config
	st  *sshTarget
	in  SSHExecInput
	// What check decided the command runs with.
	dir         string
	env         map[string]string
	sudo        bool
	outputLimit int64
}

var sshExecStreams = []string{"stdout", "stderr"}

func (k *sshExec) streams() []string { return sshExecStreams }

// check: the command and its sudo (policy), the target's credentials,
// then its stdin, directory and environment (policy).
func (k *sshExec) check(intent *audit.Record) (policy.Decision, error) {
	in := k.in
	d := k.st.rules.Decide(policy.Command{Command: in.Command, Stdin: int64(len(in.Stdin)), Sudo: in.Sudo,
		Cwd: in.Cwd, Env: in.Env, Timeout: seconds(in.TimeoutS)})
	if err := firstError(d.Err, d.SudoErr); err != nil {
		return d, err
	}
	intent.Sudo = in.Sudo
	if err := k.st.ready(nil); err != nil {
		return d, err
	}
	k.name(intent)
	if err := firstError(d.StdinErr, d.DirErr, d.EnvErr); err != nil {
		return d, err
	}
	k.dir, k.env, k.sudo, k.outputLimit = d.Dir, d.Env, d.Sudo, d.OutputLimit
	intent.Cwd, intent.Env = k.dir, envLines(k.env)
	return d, nil
}

func (k *sshExec) execute(ctx context.Context, w []io.Writer, _ *atomic.Int64) *ended {
	req := sshexec.Request{Command: k.in.Command, Dir: k.dir, Env: k.env, OutputLimit: k.outputLimit, Stdout: w[0], Stderr: w[1],
		Sudo: k.sudo, SudoPassword: k.st.sudoPassword}
	if k.in.Stdin != "" {
		req.Stdin = []byte(k.in.Stdin)
	}
	res, err := k.leased().Run(ctx, req)
	if err != nil {
		return &ended{status: StatusFailed, reason: err.Error()}
	}
	// sshexec decides timeout against cancelled, and the gateway keeps
	// its word.
	e := &ended{status: Status(res.Status), reason: res.Reason, duration: res.Duration,
		exitCode: res.ExitCode, signal: res.Signal, remoteStopped: res.RemoteStopped}
	if res.Unverified != "" {
		e.reason = strings.TrimSpace(e.reason + "; not verified stopped: " + res.Unverified)
	}
	return e
}

func (k *sshExec) drop() { k.in.Stdin = "" }

func (k *sshExec) finish(e *ended) *result {
	in, st, s := &k.in, k.st, e.streams // not a copy: drop writes k.in.Stdin
	out := &SSHExecOutput{Handle: e.handle, Target: in.Target, Status: e.status, ExitCode: e.exitCode, Signal: e.signal,
		DurationMS: e.duration.Milliseconds(), Stdout: s[0], Stderr: s[1], RemoteStopped: e.remoteStopped, Reason: e.reason}
	isError := out.Status != StatusExited || out.ExitCode == nil || *out.ExitCode != 0
	if in.Sudo && isError && strings.Contains(s[1].Head+s[1].Tail, "incorrect password") {
		out.Reason = joinReason(out.Reason, fmt.Sprintf("sudo refused the password of keyring item %q (sudo_secret of %s): store the right one with: actiongw secret set %s", st.sudoSecret, in.Target, st.sudoSecret))
	}
	return &result{structured: out, streams: []output.NamedStream{{Name: "stdout", Summary: &out.Stdout}, {Name: "stderr", Summary: &out.Stderr}},
		what: out.describe(e.command), isError: isError}
}

// question is the question for the command on its SSH target, as it
// will run: where (user@host:port), in its directory, with its
// environment.
func (k *sshExec) question() *Question {
	quote, in, where, dir, env := k.g.quote, k.in, k.st.where, k.dir, k.env
	var b strings.Builder
	fmt.Fprintf(&b, "Run this command on SSH target %q (%s)?\n\nCommand: %s\n", in.Target, where, quote(in.Command))
	if in.Sudo {
		b.WriteString("As root, with sudo.\n")
	}
	if dir != "" {
		fmt.Fprintf(&b, "Directory: %s\n", quote(dir))
	}
	parts := []string{"ssh_exec", in.Target, where, in.Command, in.Stdin, strconv.FormatBool(in.Sudo), dir}
	for _, name := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(&b, "Environment: %s=%s\n", quote(name), quote(env[name]))
		parts = append(parts, name, env[name])
	}
	writeStdin(&b, quote, in.Stdin)
	return &Question{Asked: AskedCommand, Target: in.Target, Message: b.String(),
		Remember: k.cfg.Approval.Remember, Timeout: k.cfg.Approval.Timeout, Key: questionKey(parts...)}
}

// describe says in words what ran (command, redacted) and how it
// ended.
func (out *SSHExecOutput) describe(command string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ssh_exec %q on %s: %s", output.Clip(command, 200), out.Target, out.Status)
	describeEnd(&b, out.ExitCode, out.Signal, out.DurationMS, out.Reason, out.RemoteStopped, "The remote command was", "The remote command could")
	return b.String()
}

// describeEnd goes on from a remote command's status: how it ended, after
// how long, why, and whether it was stopped and verified gone (was and
// could begin those sentences).
func describeEnd(b *strings.Builder, exitCode *int, signal string, durationMS int64, reason string, remoteStopped *bool, was, could string) {
	switch {
	case exitCode != nil:
		fmt.Fprintf(b, " with exit code %d", *exitCode)
	case signal != "":
		fmt.Fprintf(b, " by signal %s", signal)
	}
	fmt.Fprintf(b, " after %d ms.", durationMS)
	if reason != "" {
		fmt.Fprintf(b, " Reason: %s.", reason)
	}
	if remoteStopped != nil {
		if *remoteStopped {
			fmt.Fprintf(b, " %s stopped and verified gone.", was)
		} else {
			fmt.Fprintf(b, " %s NOT be verified stopped.", could)
		}
	}
}
