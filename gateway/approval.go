package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/output"
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

// Pointer is an Approver that can also send the person to the console's
// page where a question waits (MCP URL-mode elicitation), for a question
// only the console answers.
type Pointer interface {
	// Point hands the client page, the address of q on the console's
	// page, and returns once ctx ends (the question was answered, timed
	// out or withdrawn), having told the client the question is over.
	// Nothing the client answers answers q. A client that cannot open
	// addresses is not pointed: Point returns at once.
	Point(ctx context.Context, q *Question, page string)
}

// Question is what a person is asked before an action runs.
type Question struct {
	Asked Asked
	// Target names the SSH target or HTTP endpoint.
	Target string
	// Message is the whole text shown: the target and the exact action.
	Message string
	// Remember, when set, offers AnswerApproveFor: the same exact action
	// runs without asking for this long.
	Remember time.Duration
	// Timeout is how long the person has to answer.
	Timeout time.Duration
	// Key identifies the exact action (or host key) asked about, where it
	// goes and the configuration it is asked under: two questions with one
	// Key are the same question.
	Key string
	// Fingerprint is the SHA256 fingerprint of a host key asked about.
	Fingerprint string
	// NowOnly is set when the question cannot go back with the call's
	// result (ErrAskLater): the call would run again, and with it what it
	// already started (the other targets of a fan-out).
	NowOnly bool
}

// Asked is what a question is about.
type Asked string

// What questions are about.
const (
	AskedCommand Asked = "command"
	AskedRequest Asked = "request"
	AskedHostKey Asked = "host_key"
)

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

// approverOf is the Approver ctx carries, or nil.
func approverOf(ctx context.Context) Approver {
	a, _ := ctx.Value(approverKey{}).(Approver)
	return a
}

// remembered holds the exact actions a person approved for a while
// (AnswerApproveFor), by Question.Key, which names the configuration they
// were approved under: after a reload they no longer match.
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

// add remembers key until then, and forgets what expired.
func (r *remembered) add(key string, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.until == nil {
		r.until = map[string]time.Time{}
	}
	now := time.Now()
	for k, t := range r.until {
		if !now.Before(t) {
			delete(r.until, k)
		}
	}
	r.until[key] = until
}

// How an approval is recorded when nobody answered: an earlier
// AnswerApproveFor let it run, the client could not ask, or the call ended
// while the person was asked.
const (
	recordRemembered  = "remembered"
	recordUnavailable = "unavailable"
	recordWithdrawn   = "withdrawn"
)

// withdrawnError is a question withdrawn because the call ended (err).
type withdrawnError struct{ err error }

func (e *withdrawnError) Error() string {
	return "the call ended while the person at the client was asked: " + e.err.Error()
}

// shownAction reports whether an approval is a person's answer to a
// question that showed the action itself, in this call.
func shownAction(a audit.Approval) bool {
	return a.Asked != string(AskedHostKey) && a.Answer != recordRemembered
}

// approve asks q for the action a under the state s and records the
// answer in a's intent. It returns nil when the action may run,
// ErrAskLater, a *policy.DeniedError when the person (or the lack of one)
// denied it (Rule names the option that asked), or a *withdrawnError when
// the call ended first. An AnswerApproveFor is remembered once the intent
// is written (a.remember).
func (g *Gateway) approve(ctx context.Context, s *state, a *action, q *Question, rule string) error {
	q.Key = questionKey(strconv.FormatUint(s.gen, 10), q.Key)
	rec := audit.Approval{Asked: string(q.Asked), Fingerprint: q.Fingerprint}
	record := func(answer string) {
		rec.Answer = answer
		a.intent.Approvals = append(a.intent.Approvals, rec)
	}
	if q.Remember > 0 && g.approved.has(q.Key, time.Now()) {
		record(recordRemembered)
		return nil
	}
	denied := func(reason string) error { return policy.Unapproved(q.Target, rule, reason) }
	ap := approverOf(ctx)
	f := g.theFeed()
	if ap == nil && (f == nil || s.cfg.Approval.Via == config.ViaClient) {
		record(recordUnavailable)
		return denied("it needs a person's approval, and this server has no client to ask")
	}
	answer, took, via, err := g.ask(ctx, s.cfg.Approval.Via, ap, f, a, q)
	rec.WaitMS, rec.Via = took.Milliseconds(), via
	var cannot *CannotAskError
	switch {
	case errors.Is(err, ErrAskLater):
		return err
	case errors.As(err, &cannot):
		record(recordUnavailable)
		return denied(fmt.Sprintf("it needs a person's approval (%s), and %s; a person can run it, or change %s in the configuration", rule, cannot.Reason, rule))
	case err != nil:
		record(recordWithdrawn)
		return &withdrawnError{err}
	}
	record(string(answer))
	who := "the person at the client"
	if via == viaConsole {
		who = "the person at the console"
	}
	switch answer {
	case AnswerApproveFor:
		if q.Remember > 0 {
			a.remember = append(a.remember, remember{q.Key, q.Remember})
		}
		return nil
	case AnswerApprove:
		return nil
	case AnswerDecline:
		return denied(who + " declined it")
	case AnswerCancel:
		return denied(who + " dismissed the question")
	case AnswerTimeout:
		return denied(fmt.Sprintf("%s gave no answer within %v", who, q.Timeout))
	}
	return denied(fmt.Sprintf("the answer %q is not one the question offered", answer))
}

// remember is an AnswerApproveFor to keep once the action's intent is
// written: the question's key, and for how long.
type remember struct {
	key string
	d   time.Duration
}

// ruleHostKeyAsk is the option a person's trust of a host key is
// recorded under; policy names those of commands and requests.
const ruleHostKeyAsk = "host_key_policy"

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

// shown is s as the person is shown it, redacted: as it is when every
// character of it prints plainly on one line, else quoted in ASCII with
// every other character escaped, so that a line break, a terminal control,
// an odd space, a character that draws nothing or a right-to-left
// override cannot hide a part of the action from the person. A run of
// more than maxSpaceRun spaces, which could push the rest of the action
// past the edge of the person's view, is quoted too, its spaces written
// \x20. Redaction comes first: a quoted secret would match no form the
// redactor knows.
func shown(red func(string) string, s string) string {
	s = red(s)
	if printsPlainly(s) {
		return s
	}
	q := longSpaceRun.ReplaceAllStringFunc(strconv.QuoteToASCII(s), func(run string) string {
		return strings.Repeat(`\x20`, len(run))
	})
	return q + " (quoted: it holds line breaks, runs of spaces or characters that do not print plainly)"
}

// maxSpaceRun is the longest run of spaces shown as it is.
const maxSpaceRun = 3

var longSpaceRun = regexp.MustCompile(fmt.Sprintf(` {%d,}`, maxSpaceRun+1))

// printsPlainly reports whether every character of s leaves its own mark
// on one line, and no run of spaces is long.
func printsPlainly(s string) bool {
	if longSpaceRun.MatchString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsGraphic(r) || (unicode.IsSpace(r) && r != ' ') || drawsNothing(r) {
			return false
		}
	}
	return true
}

// drawsNothing reports whether r, though graphic, leaves no mark: the
// default-ignorable code points that are not format characters (Hangul
// fillers, variation selectors, the combining grapheme joiner), and the
// blank Braille pattern. Two commands that differ by one read the same.
func drawsNothing(r rune) bool {
	return unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector) || r == '\u2800'
}

// writeStdin shows the size, hash and start of a command's stdin, quoted
// with quote.
func writeStdin(b *strings.Builder, quote func(string) string, stdin string) {
	if stdin != "" {
		fmt.Fprintf(b, "Standard input: %d bytes, sha256 %s, starting %s\n", len(stdin), sha256Hex(stdin), quote(output.Clip(stdin, previewBytes)))
	}
}

// quote is s as a question shows it (shown), every secret the gateway
// knows redacted: the kinds' questions quote what they ask about with it.
func (g *Gateway) quote(s string) string { return shown(g.redactString, s) }

// hostKeyQuestion is the question for an unknown host key.
func hostKeyQuestion(cfg *config.Config, e *sshexec.HostKeyError) *Question {
	msg := fmt.Sprintf("Trust the SSH host key of target %q?\n\nHost: %s\nKey type: %s\nFingerprint: %s\n\n"+
		"%s has no key for this host. Compare the fingerprint with the one the host's administrator gives "+
		"(ssh-keygen -lf on the host's public key file). Approving adds the key to %s; a different key later is refused.",
		e.Target, e.Host, e.KeyType, e.Fingerprint, e.KnownHosts, e.KnownHosts)
	return &Question{Asked: AskedHostKey, Target: e.Target, Message: msg, Timeout: cfg.Approval.Timeout,
		Key: questionKey("host_key", e.Target, e.Host, e.Fingerprint), Fingerprint: e.Fingerprint}
}

// previewBytes bounds the start of a body or stdin shown in a question.
const previewBytes = 1024

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
