package gateway

import (
	"context"
	"io"
	"slices"
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
// and everything learned at run time.
func (g *Gateway) publishRedactor(known []redact.Secret) error {
	g.redMu.Lock()
	defer g.redMu.Unlock()
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
		o.OnToken = func(token []byte, expiry time.Time) error { return g.learn(name+".access_token", token, expiry) }
		secret := he.refreshSecret
		o.OnRefreshToken = func(ctx context.Context, token []byte) error {
			if err := g.learn(secret, token, time.Time{}); err != nil {
				return err
			}
			return g.store.Set(ctx, secret, token)
		}
	}
}

// lateRedactor passes a response body through the redactor in effect at
// its first byte, besides the capture's, which was taken when the action
// started: an OAuth2 token fetched since (the first, or a new one after a
// 401) is known to that one, as every token is learned before it is sent.
type lateRedactor struct {
	g *Gateway
	w io.Writer
	s *redact.Stream
}

func (l *lateRedactor) Write(p []byte) (int, error) {
	if l.s == nil {
		l.s = l.g.red.Load().NewStream(func(b []byte) { l.w.Write(b) })
	}
	return l.s.Write(p)
}

// end decides the held-back bytes: as the end of the body, or, when the
// body was cut short, as the start of a secret.
func (l *lateRedactor) end(cut bool) {
	switch {
	case l.s == nil:
	case cut:
		l.s.Cut()
	default:
		l.s.Close()
	}
}
