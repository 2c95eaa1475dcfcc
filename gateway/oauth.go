package gateway

import (
	"context"
	"io"
	"slices"

	"github.com/actiongw/actiongw/internal/redact"
)

// maxLearned bounds the values learned under one name that the redactor
// keeps: an endpoint's access tokens, of which a long-running server
// fetches one per lifetime. The oldest go first, long expired by then.
const maxLearned = 8

// publishRedactor makes the redactor know known (the keyring's secrets)
// and everything learned at run time.
func (g *Gateway) publishRedactor(known []redact.Secret) error {
	g.redMu.Lock()
	defer g.redMu.Unlock()
	red, err := redact.New(append(slices.Clone(known), g.learned...))
	if err != nil {
		return err
	}
	g.redKnown = known
	g.red.Store(red)
	return nil
}

// learn makes the redactor know a secret learned at run time, an OAuth2
// token, before it is used: every result, log line and audit record
// redacted from now on has it replaced with "[REDACTED:name]".
func (g *Gateway) learn(name string, value []byte) error {
	g.redMu.Lock()
	defer g.redMu.Unlock()
	sec := redact.Secret{Name: name, Value: slices.Clone(value)}
	learned := append(slices.Clone(g.learned), sec)
	if n := countName(learned, name); n > maxLearned {
		i := slices.IndexFunc(learned, func(s redact.Secret) bool { return s.Name == name })
		learned = slices.Delete(learned, i, i+1)
	}
	red, err := redact.New(append(slices.Clone(g.redKnown), learned...))
	if err != nil {
		return err
	}
	g.learned = learned
	g.red.Store(red)
	return nil
}

func countName(s []redact.Secret, name string) (n int) {
	for _, v := range s {
		if v.Name == name {
			n++
		}
	}
	return n
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
		o.OnToken = func(token []byte) error { return g.learn(name+".access_token", token) }
		secret := he.refreshSecret
		o.OnRefreshToken = func(ctx context.Context, token []byte) error {
			if err := g.learn(secret, token); err != nil {
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
