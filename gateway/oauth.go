package gateway

import (
	"context"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/actiongw/actiongw/internal/redact"
)

// learnedGrace is how long past its expiry a learned token stays
// redacted: the server's clock, not ours, decides when it stops working.
const learnedGrace = time.Minute

// learned is a secret learned at run time, and when it stops mattering.
type learned struct {
	redact.Secret
	expiry time.Time // zero: never; kept for the life of the process
}

// publishRedactor makes the redactor know known (the keyring's secrets)
// and everything learned at run time. The same secrets again (a reload
// that changed none, or the keyring read again every secretRetry while a
// secret fails to load) keep the redactor in effect: each new one is a
// stage of every running action's streams (followRedactor) for the rest
// of its life.
func (g *Gateway) publishRedactor(known []redact.Secret) error {
	g.redMu.Lock()
	defer g.redMu.Unlock()
	if g.red.Load() != nil && slices.EqualFunc(known, g.redKnown, func(a, b redact.Secret) bool {
		return a.Name == b.Name && string(a.Value) == string(b.Value)
	}) {
		return nil
	}
	red, err := redact.New(append(slices.Clone(known), secretsOf(g.learned)...))
	if err != nil {
		return err
	}
	g.redKnown = known
	g.red.Store(red)
	return nil
}

// learn makes the redactor know a secret learned at run time, an OAuth2
// token, before it is used: every result, log line and audit record
// redacted from now on has it replaced with "[REDACTED:name]", until
// learnedGrace past expiry (zero: for good). Tokens are never dropped
// before they expire, however many an agent makes the gateway fetch (a
// 401 fetches one): a live token that came back unredacted would be a
// credential handed to the agent.
func (g *Gateway) learn(name string, value []byte, expiry time.Time) error {
	g.redMu.Lock()
	defer g.redMu.Unlock()
	now := time.Now()
	kept := slices.DeleteFunc(slices.Clone(g.learned), func(l learned) bool {
		return !l.expiry.IsZero() && now.After(l.expiry.Add(learnedGrace))
	})
	kept = append(kept, learned{redact.Secret{Name: name, Value: slices.Clone(value)}, expiry})
	red, err := redact.New(append(slices.Clone(g.redKnown), secretsOf(kept)...))
	if err != nil {
		return err
	}
	g.learned = kept
	g.red.Store(red)
	return nil
}

func secretsOf(l []learned) []redact.Secret {
	out := make([]redact.Secret, len(l))
	for i, v := range l {
		out[i] = v.Secret
	}
	return out
}

// learnHooks tells the OAuth2 endpoints of tg where their tokens go: the
// access tokens to the redactor; a rotated refresh token to the redactor
// and back to the keyring item it came from.
func (g *Gateway) learnHooks(tg *targets) {
	for name, he := range tg.http {
		o := he.endpoint.Auth.OAuth2
		if o == nil {
			continue
		}
		o.OnToken = func(token []byte, expiry time.Time) error { return g.learn(name+accessTokenSuffix, token, expiry) }
		secret := he.refreshSecret
		o.OnRefreshToken = func(ctx context.Context, token []byte) error {
			if err := g.learn(secret, token, time.Time{}); err != nil {
				return err
			}
			return g.store.Set(ctx, secret, token)
		}
	}
}

// accessTokenSuffix ends the name an endpoint's OAuth2 access tokens are
// redacted under: "ENDPOINT.access_token".
const accessTokenSuffix = ".access_token"

// followRedactor passes an action's stream through every redactor put in
// effect after the action started, besides the capture's, taken when it
// started: an OAuth2 token learned meanwhile, by this action or by
// another whose server echoes it into this one's output (a request log,
// a log file that tail -f follows), or a secret that a reload added. Each
// newer redactor becomes a stage at the input, so no byte that could hold
// its new secret reaches an older stage first, and what older stages hold
// back stays theirs, never released early. A secret is learned before it
// is sent anywhere, so every echo of it comes after the stage that knows
// it.
type followRedactor struct {
	g *Gateway

	mu     sync.Mutex
	last   *redact.Redactor // the newest redactor in use, by a stage or the capture
	head   io.Writer        // where bytes go in: the newest stage, else the capture
	stages []*redact.Stream // oldest first
}

// follow wraps w, a capture that redacts with red.
func (g *Gateway) follow(w io.Writer, red *redact.Redactor) *followRedactor {
	return &followRedactor{g: g, last: red, head: w}
}

func (f *followRedactor) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if red := f.g.red.Load(); red != f.last {
		next := f.head
		s := red.NewStream(func(b []byte) { next.Write(b) })
		f.stages = append(f.stages, s)
		f.head, f.last = s, red
	}
	return f.head.Write(p)
}

// matched returns the names of the secrets the stages replaced whole.
func (f *followRedactor) matched() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for _, s := range f.stages {
		names = append(names, s.Matched()...)
	}
	return names
}

// end decides the stages' held-back bytes, newest first so that what one
// releases passes the older ones: as the end of the output, or, when the
// action was cut short, as the start of a secret.
func (f *followRedactor) end(cut bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.stages) - 1; i >= 0; i-- {
		if cut {
			f.stages[i].Cut()
		} else {
			f.stages[i].Close()
		}
	}
}
