package policy

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// Verdict is what policy says of a call.
type Verdict int

const (
	// Allowed: the call may run.
	Allowed Verdict = iota
	// Asked: a person decides first, under the option Decision.Rule
	// names.
	Asked
	// Denied: the call may not run; Decision.Err says why.
	Denied
)

// A Decision is policy's word on one call, made once from the call and
// its target's rules, with what the call runs with: its timeout, its caps,
// and for a command its sudo, directory and environment. What comes after
// it maps it and decides none of it again.
type Decision struct {
	Verdict Verdict
	// Rule is the option a person is asked under (approve,
	// approve_methods), when Verdict is Asked.
	Rule string
	// Err is why the call may not run, when Verdict is Denied: a
	// *DeniedError when the target's rules forbid it, a *LimitError when
	// the call is outside a bound.
	Err error

	// Timeout is the call's timeout: the one it asked for (AskedTimeout;
	// 0 for none), else the target's, never more than the target's
	// max_timeout; Capped says the ask was lowered to that.
	Timeout      time.Duration
	AskedTimeout time.Duration
	Capped       bool

	// OutputLimit caps a command's stdout and stderr together (0: none),
	// MaxBytes a file transfer's bytes.
	OutputLimit int64
	MaxBytes    int64
	// NoRedirects is set for a request a person approves: it follows no
	// redirect, since the person saw one method and path.
	NoRedirects bool

	// A command's verdicts on how it runs, each nil when allowed: sudo
	// (Sudo says it runs under it), its stdin, its directory (Dir) and
	// its environment (Env: the target's with the call's on top).
	SudoErr, StdinErr, DirErr, EnvErr error
	Sudo                              bool
	Dir                               string
	Env                               map[string]string
}

// deny makes d a denial for err, unless it is one already.
func (d *Decision) deny(err error) {
	if d.Verdict != Denied {
		d.Verdict, d.Rule, d.Err = Denied, "", err
	}
}

// ask makes an allowed d ask a person under rule.
func (d *Decision) ask(rule string) {
	if d.Verdict == Allowed {
		d.Verdict, d.Rule = Asked, rule
	}
}

// LimitError refuses a call outside a bound that every call or its target
// keeps: a size, a byte that no shell command can hold, a name that
// cannot be set. Such a call is refused as failed, not denied: no rule of
// the target forbade it, its shape did.
type LimitError struct {
	Rule   string // the bound, as the config names it: "max_stdin_bytes", "env"
	Reason string // in a few words, for the audit log: "stdin too large"
	Msg    string // for the agent: what was wrong and what the bound is
}

func (e *LimitError) Error() string { return e.Msg }

// The approve option of an SSH target: whether a person is asked before
// a command runs.
const (
	ApproveNever    = "never"    // never: the allow list decides
	ApproveUnlisted = "unlisted" // for a command the allow list does not match
	ApproveAlways   = "always"   // for every command the rules allow
)

// The options a person's answer is recorded under.
const (
	RuleApprove        = "approve"
	RuleApproveMethods = "approve_methods"
)

// Bounds of every command's directory and environment, the call's and
// the target's together (config holds a target's to them as it loads).
const (
	MaxCwdBytes      = 4096
	MaxEnv           = 64
	MaxEnvValueBytes = 4096
)

// MaxPathBytes bounds the remote path of a file transfer.
const MaxPathBytes = 4096

// timeout returns the timeout for a call that asked for asked (0: none
// given): def when none was given, never more than max. capped reports
// whether the ask was lowered.
func timeout(asked, def, max time.Duration) (d time.Duration, capped bool) {
	switch {
	case asked <= 0:
		return min(def, max), false
	case asked > max:
		return max, true
	}
	return asked, false
}

// budget is a decision with the call's timeout set.
func budget(asked, def, max time.Duration) Decision {
	d := Decision{AskedTimeout: asked}
	d.Timeout, d.Capped = timeout(asked, def, max)
	return d
}

// clip shortens what an agent sent to a length a message can carry.
func clip(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// clipDots cuts s to at most n bytes, at the end of a character, and
// marks the cut with "..." (as the gateway's texts cut what they quote).
func clipDots(s string, n int) string {
	if len(s) <= n {
		return s
	}
	b := s[:n]
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRuneInString(b[i:]) {
				b = b[:i]
			}
			break
		}
	}
	return b + "..."
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
