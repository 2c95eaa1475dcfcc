package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/actiongw/actiongw/policy"
	"github.com/actiongw/actiongw/sshexec"
)

// SSHExecInput is the input of the ssh_exec tool.
type SSHExecInput struct {
	Target   string  `json:"target" jsonschema:"name of an SSH target, as list_targets gives it"`
	Command  string  `json:"command" jsonschema:"shell command to run on the target"`
	Stdin    string  `json:"stdin,omitempty" jsonschema:"text sent to the command's standard input, then end of file"`
	TimeoutS float64 `json:"timeout_s,omitempty" jsonschema:"seconds after which the command is stopped; capped by the target's maximum"`
}

// SSHExecOutput is the structured result of ssh_exec.
type SSHExecOutput struct {
	Handle string `json:"handle"`
	Target string `json:"target"`
	// Status is exited, signaled, timeout, cancelled, output_limit or failed.
	Status     string        `json:"status"`
	ExitCode   *int          `json:"exit_code,omitempty"`
	Signal     string        `json:"signal,omitempty"`
	DurationMS int64         `json:"duration_ms"`
	Stdout     StreamSummary `json:"stdout"`
	Stderr     StreamSummary `json:"stderr"`
	// RemoteStopped is set when the command had to be stopped: true only
	// when its processes were verified gone.
	RemoteStopped *bool  `json:"remote_stopped,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// Progress receives the bytes an action received so far.
type Progress func(bytes int64, elapsed time.Duration)

// SSHExec runs one command on a configured SSH target.
func (g *Gateway) SSHExec(ctx context.Context, in SSHExecInput, progress Progress) *ToolResult {
	st, ok := g.sshTargets[in.Target]
	if !ok {
		return g.failure("unknown SSH target %q; known SSH targets: %s (see list_targets)", in.Target, strings.Join(g.targetNames(true), ", "))
	}
	intent := &AuditRecord{Tool: "ssh_exec", Target: in.Target, Command: in.Command}
	if err := st.commands.Check(in.Command); err != nil {
		var de *policy.DeniedError
		errors.As(err, &de)
		g.deny(intent, "denied", de.Rule, de.Reason)
		return g.failure("%v", err)
	}
	if st.err != nil {
		g.deny(intent, "failed", "credentials", st.err.Error())
		return g.failure("cannot use target %q: %v", in.Target, st.err)
	}
	if int64(len(in.Stdin)) > st.stdin {
		g.deny(intent, "failed", "max_stdin_bytes", "stdin too large")
		return g.failure("stdin is %d bytes; target %q accepts at most %d (max_stdin_bytes)", len(in.Stdin), in.Target, st.stdin)
	}
	c := g.cfg.SSH[in.Target]
	timeout, capped := policy.Timeout(seconds(in.TimeoutS), c.Timeout, c.MaxTimeout)

	actx, act, err := g.begin(ctx, intent)
	if err != nil {
		return g.failure("%v", err)
	}
	defer act.done()
	lim := CaptureLimits{HeadBytes: g.cfg.Server.HeadBytes, TailBytes: g.cfg.Server.TailBytes}
	stdout := act.out.Capture("stdout", g.red, lim)
	stderr := act.out.Capture("stderr", g.red, lim)
	req := sshexec.Request{
		Command: in.Command, Timeout: timeout, OutputLimit: st.output,
		Stdout: stdout, Stderr: stderr,
	}
	if in.Stdin != "" {
		req.Stdin = []byte(in.Stdin)
	}
	if progress != nil {
		req.Progress = func(n int64, d time.Duration) { progress(n, d) }
	}
	res, runErr := g.ssh.Run(actx, st.target, req)
	act.out.Finish()

	out := SSHExecOutput{Handle: act.out.Handle(), Target: in.Target, Stdout: stdout.Summary(), Stderr: stderr.Summary()}
	if runErr != nil {
		out.Status, out.Reason = "failed", runErr.Error()
		if actx.Err() != nil {
			out.Status, out.Reason = statusOf(actx), g.cancelReason(actx)
		}
		out.DurationMS = time.Since(act.start).Milliseconds()
	} else {
		out.Status, out.ExitCode, out.Signal = string(res.Status), res.ExitCode, res.Signal
		out.DurationMS, out.RemoteStopped, out.Reason = res.Duration.Milliseconds(), res.RemoteStopped, res.Reason
		if res.Status == sshexec.StatusCancelled {
			out.Reason = g.cancelReason(actx)
		}
	}
	out.Reason = g.red.RedactString(out.Reason)
	if capped && out.Status == "timeout" {
		out.Reason += fmt.Sprintf(" (timeout_s was capped to the target's max_timeout of %v)", c.MaxTimeout)
	}
	auditErr := g.audit.Append(&AuditRecord{
		Kind: "outcome", Handle: out.Handle, Tool: "ssh_exec", Target: in.Target,
		Status: out.Status, ExitCode: out.ExitCode, Signal: out.Signal, DurationMS: out.DurationMS,
		Reason: out.Reason, RemoteStopped: out.RemoteStopped,
		Streams: map[string]AuditStream{
			"stdout": {Bytes: out.Stdout.Bytes, SHA256: out.Stdout.SHA256},
			"stderr": {Bytes: out.Stderr.Bytes, SHA256: out.Stderr.SHA256},
		},
	})
	isError := out.Status != "exited" || out.ExitCode == nil || *out.ExitCode != 0
	return g.result(&out, isError, auditErr, describeSSH(&out, in.Command), out.Handle,
		NamedStream{"stdout", &out.Stdout}, NamedStream{"stderr", &out.Stderr})
}

// statusOf names why ctx ended: timeout or cancelled.
func statusOf(ctx context.Context) string {
	if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return "timeout"
	}
	return "cancelled"
}

func seconds(s float64) time.Duration {
	if s <= 0 {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

// describeSSH says in words what ran and how it ended.
func describeSSH(out *SSHExecOutput, command string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ssh_exec %q on %s: %s", clip(command, 200), out.Target, out.Status)
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
