package policy

import (
	"slices"
	"time"
)

// HTTP holds the rules of one HTTP endpoint: which requests a call may
// send, which a person approves first, and with which budget.
type HTTP struct {
	Requests
	// ApproveMethods are the methods whose requests a person approves.
	ApproveMethods []string
	// Timeout is a call's timeout when it asks for none, MaxTimeout the
	// most it may ask for.
	Timeout, MaxTimeout time.Duration
}

// Decide decides whether a request may be sent with method and path (the
// normalized path relative to the base URL, as Requests.Check takes it),
// and with which timeout; timeout is what the call asked for (0: none).
// Requests.Check also judges every redirect hop, where httpact calls it.
func (r *HTTP) Decide(method, path string, timeout time.Duration) Decision {
	d := budget(timeout, r.Timeout, r.MaxTimeout)
	if err := r.Check(method, path); err != nil {
		d.deny(err)
		return d
	}
	if slices.Contains(r.ApproveMethods, method) {
		d.ask(RuleApproveMethods)
		d.NoRedirects = true
	}
	return d
}
