package gateway

import (
	"context"
	"errors"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/policy"
	"github.com/actiongw/actiongw/sshexec"
)

// How the pipeline records and answers an action that did not run.

// refused audits an action that check refused, a denial by policy or a
// refusal for a reason of its target or request, and returns its status.
func (g *Gateway) refused(c *core, intent *audit.Record, err error) Status {
	var de *policy.DeniedError
	var le *policy.LimitError
	var ue *unusableError
	switch {
	case errors.As(err, &de):
		g.refuse(c, intent, StatusDenied, de.Rule, de.Reason)
		return StatusDenied
	case errors.As(err, &le):
		g.refuse(c, intent, StatusFailed, le.Rule, le.Reason)
	case errors.As(err, &ue):
		g.refuse(c, intent, StatusFailed, ue.rule, ue.reason)
	default:
		g.refuse(c, intent, StatusFailed, "", err.Error())
	}
	return StatusFailed
}

// notStarted audits and answers a call that queued and did not start:
// busy when no slot or session freed up in time, timeout when connecting
// took its whole timeout, cancelled when ctx ended, failed when it could
// not connect.
func (g *Gateway) notStarted(ctx context.Context, c *core, intent *audit.Record, err error) *ToolResult {
	var busy *BusyError
	var queued *sshexec.QueueError
	var te *timeoutError
	status, text := StatusFailed, err.Error()
	switch {
	case errors.As(err, &busy):
		status = StatusBusy
	case errors.As(err, &queued):
		status, text = StatusBusy, "busy: "+err.Error()+"; try again shortly"
	case errors.As(err, &te):
		status, text = StatusTimeout, "timed out while connecting: "+err.Error()
	case ctx.Err() != nil:
		status, text = StatusCancelled, "cancelled before it started: "+g.cancelReason(ctx)
	}
	intent.Handle = output.NewHandle() // names the call in both records; no output is kept
	g.record(c, intent, "allow", status, "", "did not start: "+text)
	r := g.failure("the action did not start: %s", text)
	r.status = status
	return r
}

// unusableError refuses an action for a reason of its target or its
// request, with the config key (rule) behind it.
type unusableError struct {
	rule   string // e.g. "credentials", "max_stdin_bytes"
	reason string // for the audit outcome
	err    error  // for the agent
}

func (e *unusableError) Error() string { return e.err.Error() }

// refuse audits a call that was refused: an intent with the decision and
// the rule, and an outcome that says why it did not run.
func (g *Gateway) refuse(c *core, intent *audit.Record, status Status, rule, reason string) {
	if intent.Handle == "" {
		intent.Handle = output.NewHandle() // names the call in both records; no output is kept
	}
	g.record(c, intent, "deny", status, rule, reason)
}

// record audits a call that did not run: its intent with the decision,
// and an outcome that says why.
func (g *Gateway) record(c *core, intent *audit.Record, decision string, status Status, rule, reason string) {
	intent.Kind, intent.Decision, intent.Rule = "intent", decision, rule
	err := g.appendAudit(c, intent)
	if err == nil {
		err = g.appendAudit(c, &audit.Record{Kind: "outcome", Handle: intent.Handle, Parent: intent.Parent, Tool: intent.Tool, Target: intent.Target,
			Status: string(status), Rule: rule, Reason: reason})
	}
	if err != nil {
		g.log.Error("audit log: a refused call could not be recorded", "tool", intent.Tool, "target", intent.Target, "error", err)
	}
}
