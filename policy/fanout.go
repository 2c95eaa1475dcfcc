package policy

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Fanout decides a call that runs one command on many targets (label
// names them) from what was decided for each: refusals holds each
// target's refusal (nil when none), and asks says whether any target asks
// a person first. A denial on any target denies the whole call, so that
// nothing runs; other refusals (a missing secret, a bound) fail that
// target alone, when it starts. timeout is the call's own bound.
func Fanout(label string, refusals []error, asks bool, timeout time.Duration) Decision {
	d := Decision{Timeout: timeout}
	var denied []*DeniedError
	for _, err := range refusals {
		var de *DeniedError
		if errors.As(err, &de) {
			denied = append(denied, de)
		}
	}
	switch {
	case len(denied) > 0:
		d.deny(&DeniedError{Target: label, Rule: "the targets' rules",
			Reason: fmt.Sprintf("nothing ran: %s of %d refuse the command: %s", plural(len(denied), "target"), len(refusals), denials(denied))})
	case asks:
		d.ask(RuleApprove)
	}
	return d
}

// denials says which targets refused a command and why, the targets with
// the same reason and rule together.
func denials(denied []*DeniedError) string {
	type why struct{ reason, rule string }
	var order []why
	by := map[why][]string{}
	for _, de := range denied {
		w := why{de.Reason, de.Rule}
		if _, ok := by[w]; !ok {
			order = append(order, w)
		}
		by[w] = append(by[w], de.Target)
	}
	parts := make([]string, 0, len(order))
	for _, w := range order {
		parts = append(parts, fmt.Sprintf("%s: %s (%s)", listNames(by[w], 8), clipDots(w.reason, 300), clipDots(w.rule, 300)))
	}
	return clipDots(strings.Join(parts, "; "), 4000)
}

// listNames names the first n of names, and how many more there are.
func listNames(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + fmt.Sprintf(", and %d more", len(names)-n)
}

// A call decided under rules that a reload replaced since is refused:
// those rules may no longer allow it, or send it elsewhere.

// Reloaded denies a call that waited for a slot while a reload changed
// the configuration.
func Reloaded(target string) *DeniedError {
	return &DeniedError{Target: target, Rule: "reload",
		Reason: "the configuration was reloaded while this call waited; call again to run under the rules now in effect"}
}

// Removed denies a target of a fan-out that a reload removed while the
// fan-out ran.
func Removed(target string) *DeniedError {
	return &DeniedError{Target: target, Rule: "reload",
		Reason: "the target was removed from the configuration by a reload while the fan-out ran"}
}

// Reasked denies a target of a fan-out whose command a reload made ask a
// person, or ask another question, after the fan-out's question was asked.
func Reasked(target string) *DeniedError {
	return &DeniedError{Target: target, Rule: RuleApprove,
		Reason: "a reload while the fan-out ran made the command ask a person first on this target, or changed the target; call again to ask"}
}

// Unapproved denies an action a person was asked about under rule and did
// not approve, or could not be asked about; reason says which.
func Unapproved(target, rule, reason string) error {
	return &unapprovedError{&DeniedError{Target: target, Rule: rule, Reason: reason}}
}

// unapprovedError is a denial by a person, or by the lack of one, told as
// what it is.
type unapprovedError struct{ *DeniedError }

func (e *unapprovedError) Error() string {
	return fmt.Sprintf("not approved: %s (%s of %q)", e.Reason, e.Rule, e.Target)
}

func (e *unapprovedError) Unwrap() error { return e.DeniedError }
