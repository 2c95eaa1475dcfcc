package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/actiongw/actiongw/httpact"
	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/policy"
	"github.com/actiongw/actiongw/sshexec"
)

// Approver asks the person at the MCP client whether an action may run.
// The MCP server gives each call its own (WithApprover), tied to the
// session the call came on: an answer comes only from that client's
// elicitation response, never from the agent's arguments.
type Approver interface {
	// Ask puts q to the person and returns the answer and how long the
	// person took; q.Timeout bounds that (AnswerTimeout). It returns a
	// *CannotAskError when the client cannot ask, ErrAskLater when the
	// question goes back with the call's result (the call is then made
	// again with the answer), and ctx's error when the call ended first.
	Ask(ctx context.Context, q *Question) (Answer, time.Duration, error)
}

// Question is what a person is asked before an action runs.
type Question struct {
	// Asked is what it is about: "command", "request" or "host_key".
	Asked string
	// Target names the SSH target or HTTP endpoint.
	Target string
	// Message is the whole text shown: the target and the exact action.
	Message string
	// Remember, when set, offers AnswerApproveFor: the same exact action
	// runs without asking for this long.
	Remember time.Duration
	// Timeout is how long the person has to answer.
	Timeout time.Duration
	// Key identifies the exact action (or host key) asked about: two
	// questions with one Key are the same question.
	Key string
	// Fingerprint is the SHA256 fingerprint of a host key asked about.
	Fingerprint string
}

// Answer is a person's answer to a Question.
type Answer string

// The answers. Only the first two let an action run.
const (
	AnswerApprove    Answer = "approve"
	AnswerApproveFor Answer = "approve_for"
	AnswerDecline    Answer = "decline"
	AnswerCancel     Answer = "cancel"
	AnswerTimeout    Answer = "timeout"
)

// ErrAskLater is what an Approver returns when the question is sent back
// with the call's result instead of being asked now (MCP's multi
// round-trip requests): nothing is done or recorded, and the call comes
// again with the answer.
var ErrAskLater = errors.New("the question goes to the client with the call's result")

// CannotAskError is an Approver's refusal to ask: the client declared no
// elicitation support, or the server has no way to ask.
type CannotAskError struct{ Reason string }

func (e *CannotAskError) Error() string { return e.Reason }

type approverKey struct{}

// WithApprover returns ctx carrying a, which the actions of a call made
// with ctx ask for approval.
func WithApprover(ctx context.Context, a Approver) context.Context {
	return context.WithValue(ctx, approverKey{}, a)
}

// remembered holds the exact actions a person approved for a while
// (AnswerApproveFor), by Question.Key. A reload forgets them.
type remembered struct {
	mu    sync.Mutex
	until map[string]time.Time
}

func (r *remembered) has(key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	until, ok := r.until[key]
	if ok && !now.Before(until) {
		delete(r.until, key)
		return false
	}
	return ok
}

func (r *remembered) add(key string, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.until == nil {
		r.until = map[string]time.Time{}
	}
	r.until[key] = until
}

func (r *remembered) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.until)
}

// approve asks q and records the answer in intent. It returns nil when
// the action may run, ErrAskLater, a *policy.DeniedError when the person
// (or the lack of one) denied it (Rule names the option that asked), or
// the call's ended context.
func (g *Gateway) approve(ctx context.Context, intent *audit.Record, q *Question, rule string) error {
	q.Message = g.redactString(q.Message)
	rec := audit.Approval{Asked: q.Asked, Fingerprint: q.Fingerprint}
	if q.Remember > 0 && g.approved.has(q.Key, time.Now()) {
		rec.Answer = "remembered"
		intent.Approvals = append(intent.Approvals, rec)
		return nil
	}
	denied := func(reason string) error {
		return &policy.DeniedError{Target: q.Target, Rule: rule, Reason: reason}
	}
	a, _ := ctx.Value(approverKey{}).(Approver)
	if a == nil {
		rec.Answer = "unavailable"
		intent.Approvals = append(intent.Approvals, rec)
		return denied("it needs a person's approval, and this server has no client to ask")
	}
	answer, took, err := a.Ask(ctx, q)
	rec.WaitMS = took.Milliseconds()
	var cannot *CannotAskError
	switch {
	case errors.Is(err, ErrAskLater):
		return err
	case errors.As(err, &cannot):
		rec.Answer = "unavailable"
		intent.Approvals = append(intent.Approvals, rec)
		return denied(fmt.Sprintf("it needs a person's approval (%s), and %s; a person can run it, or change %s in the configuration", rule, cannot.Reason, rule))
	case err != nil:
		return err
	}
	rec.Answer = string(answer)
	intent.Approvals = append(intent.Approvals, rec)
	switch answer {
	case AnswerApproveFor:
		if q.Remember > 0 {
			g.approved.add(q.Key, time.Now().Add(q.Remember))
		}
		return nil
	case AnswerApprove:
		return nil
	case AnswerDecline:
		return denied("the person at the client declined it")
	case AnswerCancel:
		return denied("the person at the client dismissed the question")
	case AnswerTimeout:
		return denied(fmt.Sprintf("the person at the client gave no answer within %v", q.Timeout))
	}
	return denied(fmt.Sprintf("the answer %q is not one the question offered", answer))
}

// askedRule is the rule a person's denial is recorded under.
const (
	ruleApprove      = "approve"
	ruleApproveHTTP  = "approve_methods"
	ruleHostKeyAsk   = "host_key_policy"
	approvalAskedSSH = "command"
	approvalAskedAPI = "request"
)

// questionKey is a Question.Key: a digest of what makes an action that
// action, each part length-prefixed so that no two lists of parts share
// a key.
func questionKey(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// shown is s as the person is shown it: as it is when every character of
// it prints plainly on one line, else quoted with escapes, so that a line
// break, a terminal control, an odd space or a right-to-left override
// (quoted in ASCII, every other character escaped) cannot hide a part
// of the action from the person.
func shown(s string) string {
	for _, r := range s {
		if !unicode.IsGraphic(r) || (unicode.IsSpace(r) && r != ' ') {
			return strconv.QuoteToASCII(s) + " (quoted: it holds line breaks or characters that do not print plainly)"
		}
	}
	return s
}

// commandQuestion is the question for one command on an SSH target.
func commandQuestion(cfg *config.Config, target, host string, in SSHExecInput, dir, env string) *Question {
	var b strings.Builder
	fmt.Fprintf(&b, "Run this command on SSH target %q (%s)?\n\nCommand: %s\n", target, host, shown(in.Command))
	if in.Sudo {
		b.WriteString("As root, with sudo.\n")
	}
	if dir != "" {
		fmt.Fprintf(&b, "Directory: %s\n", shown(dir))
	}
	if env != "" {
		fmt.Fprintf(&b, "Environment: %s\n", shown(env))
	}
	if in.Stdin != "" {
		fmt.Fprintf(&b, "Standard input: %d bytes, sha256 %s, starting %s\n", len(in.Stdin), sha256Hex(in.Stdin), shown(preview(in.Stdin)))
	}
	return &Question{Asked: approvalAskedSSH, Target: target, Message: b.String(),
		Remember: cfg.Approval.Remember, Timeout: cfg.Approval.Timeout,
		Key: questionKey("ssh_exec", target, in.Command, in.Stdin, strconv.FormatBool(in.Sudo), dir, env)}
}

// hostKeyQuestion is the question for an unknown host key.
func hostKeyQuestion(cfg *config.Config, e *sshexec.HostKeyError) *Question {
	msg := fmt.Sprintf("Trust the SSH host key of target %q?\n\nHost: %s\nKey type: %s\nFingerprint: %s\n\n"+
		"%s has no key for this host. Compare the fingerprint with the one the host's administrator gives "+
		"(ssh-keygen -lf on the host's public key file). Approving adds the key to %s; a different key later is refused.",
		e.Target, e.Host, e.KeyType, e.Fingerprint, e.KnownHosts, e.KnownHosts)
	return &Question{Asked: "host_key", Target: e.Target, Message: msg, Timeout: cfg.Approval.Timeout,
		Key: questionKey("host_key", e.Target, e.Host, e.Fingerprint), Fingerprint: e.Fingerprint}
}

// previewBytes bounds the start of a body or stdin shown in a question.
const previewBytes = 1024

func preview(s string) string {
	if len(s) <= previewBytes {
		return s
	}
	cut := previewBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// asksHostKey reports whether the target asks a person about an unknown
// host key (host_key_policy = "ask").
func asksHostKey(cfg *config.Config, target string) bool {
	t := cfg.SSH[target]
	return t != nil && t.HostKeyPolicy == "ask"
}

// fanQuestion is the one question of a fan-out whose targets asking lists
// the questions of the targets that ask about the command.
func fanQuestion(cfg *config.Config, label string, in SSHExecManyInput, asking []*Question, ssh map[string]*sshTarget) *Question {
	var b strings.Builder
	fmt.Fprintf(&b, "Run this command on %d SSH targets (%s)?\n\nCommand: %s\n", len(asking), shown(label), shown(in.Command))
	if in.Stdin != "" {
		fmt.Fprintf(&b, "Standard input: %d bytes, sha256 %s, starting %s\n", len(in.Stdin), sha256Hex(in.Stdin), shown(preview(in.Stdin)))
	}
	b.WriteString("\nTargets that ask before this command runs:\n")
	keys := []string{"ssh_exec_many"}
	for _, q := range asking {
		fmt.Fprintf(&b, "- %s (%s)\n", q.Target, ssh[q.Target].where)
		keys = append(keys, q.Key)
	}
	return &Question{Asked: approvalAskedSSH, Target: label, Message: b.String(),
		Remember: cfg.Approval.Remember, Timeout: cfg.Approval.Timeout, Key: questionKey(keys...)}
}

// requestQuestion is the question for one HTTP request.
func requestQuestion(cfg *config.Config, endpoint, base string, req httpact.Request) *Question {
	var b strings.Builder
	path := req.Path
	if len(req.Query) > 0 {
		path += "?" + req.Query.Encode()
	}
	fmt.Fprintf(&b, "Send this request to HTTP endpoint %q (%s)?\n\n%s %s\n", endpoint, base, req.Method, shown(path))
	names := slices.Sorted(maps.Keys(req.Headers))
	var headers strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, "%s: %s\n", shown(k), shown(req.Headers[k]))
		fmt.Fprintf(&headers, "%s: %s\n", k, req.Headers[k])
	}
	body := string(req.Body)
	if body != "" {
		kind := "Body"
		if req.JSON {
			kind = "JSON body"
		}
		fmt.Fprintf(&b, "\n%s: %d bytes, sha256 %s:\n%s\n", kind, len(body), sha256Hex(body), shown(preview(body)))
	}
	return &Question{Asked: approvalAskedAPI, Target: endpoint, Message: b.String(),
		Remember: cfg.Approval.Remember, Timeout: cfg.Approval.Timeout,
		Key: questionKey("http_request", endpoint, req.Method, path, headers.String(), strconv.FormatBool(req.JSON), body)}
}
