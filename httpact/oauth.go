package httpact

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// OAuth2 is where the OAuth2 auth kinds get their access tokens. Secret
// values come from the keyring; tokens are fetched by Do when needed and
// kept by the Client until shortly before they expire.
type OAuth2 struct {
	// TokenURL is the token endpoint: https, or http to a loopback host
	// when the endpoint has AllowPrivate or Via is set (CheckTokenURL).
	// It is reached through the endpoint's own transport, so the address
	// guard and RootCAs apply to it as to the endpoint; redirects are not
	// followed.
	TokenURL string
	// Via, if set, carries the connections to the token URL's host and
	// port, as Endpoint.Via does the base URL's: the same one, another,
	// or nil to connect from this host through the address guard.
	Via      *Via
	ClientID string
	// ClientSecret is required by AuthOAuth2ClientCredentials; for
	// AuthOAuth2RefreshToken, nil sends none (a public client).
	ClientSecret []byte
	// Scopes are asked for by AuthOAuth2ClientCredentials; empty asks for
	// none (the server's default).
	Scopes []string
	// RefreshToken is the grant of AuthOAuth2RefreshToken. A rotated one
	// the server returns replaces it in the Client for as long as this
	// value stays configured, and is given to OnRefreshToken.
	RefreshToken []byte
	// OnToken is given every access token fetched, before it is sent
	// anywhere, and when the token endpoint says it expires (zero if it
	// does not): the caller registers it with its redactor. An error stops
	// the request, and the token is not used. Do refuses an endpoint
	// without it.
	OnToken func(token []byte, expiry time.Time) error
	// OnRefreshToken is given a rotated refresh token before it is used:
	// the caller stores it where RefreshToken came from, and registers it
	// with its redactor. An error is logged and the new token used anyway,
	// since the server may have revoked the old one. Do refuses an
	// AuthOAuth2RefreshToken endpoint without it.
	OnRefreshToken func(ctx context.Context, token []byte) error
}

// CheckTokenURL checks an OAuth2 token endpoint URL: https, or http to a
// loopback host (localhost, 127.0.0.0/8, ::1) when allowPrivate is set, as
// a token must not cross a network in the clear; no userinfo, query or
// fragment. Its error names no secret.
func CheckTokenURL(raw string, allowPrivate bool) error {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return errors.New("is required")
	case err != nil:
		return errors.New("is not a URL")
	case u.Scheme != "https" && u.Scheme != "http":
		return errors.New("must start with https://")
	case u.Opaque != "" || u.Hostname() == "":
		return errors.New("must name a host")
	case u.User != nil:
		return errors.New("must not contain userinfo: the client secret belongs in the keyring")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return errors.New("must not contain a query or fragment")
	case u.Scheme == "http" && !(allowPrivate && loopbackHost(u.Hostname())):
		return errors.New("must start with https:// (http:// only to a loopback host, with allow_private)")
	}
	return nil
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.Unmap().IsLoopback()
}

// validScope reports whether s is an RFC 6749 scope-token.
func validScope(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == '"' || r == '\\' || r >= 0x7f })
}

// tokenRenewMargin is how long before its expiry a cached access token is
// fetched again, so that it does not expire in flight; a token that lives
// less than four times as long is renewed after three quarters of its life.
const tokenRenewMargin = 10 * time.Second

// A 401 fetches a new token at most refetchBurst times at once, then once
// per refetchInterval; past that, the 401 is the answer. Every token
// fetched is handed to OnToken, whose redactor keeps it until it expires:
// without a bound, an agent calling a path that always answers 401 (a
// scope the client lacks) would grow it by one token per call, and fetch
// from the token endpoint as fast as it calls.
const (
	refetchBurst    = 4
	refetchInterval = 15 * time.Second
)

// errRefetchLimited is token's answer when 401s fetched too many tokens
// lately: the 401 stands.
var errRefetchLimited = errors.New("401s fetched too many access tokens lately")

// tokenCache is one endpoint's access token and what fetches it.
type tokenCache struct {
	key tokenKey
	// lock is held while the token is read or fetched; a request waiting
	// for it can give up on its context.
	lock    chan struct{}
	token   []byte
	renewAt time.Time // zero: no expiry was given, kept until a 401
	// refresh is the refresh token in use: the configured one, or the one
	// the server rotated it to.
	refresh []byte
	// refetchFull is when the refetch allowance is whole again (the
	// theoretical arrival time of a cell rate algorithm); zero: it is.
	refetchFull time.Time
	cc          *clientcredentials.Config
	rt          *oauth2.Config
}

// tokenKey tells whether a cached token still belongs to the endpoint's
// configuration; secrets are kept as digests.
type tokenKey struct {
	kind, tokenURL, clientID, scopes string
	secret, refresh                  [32]byte
}

func keyOf(e *Endpoint) tokenKey {
	o := e.Auth.OAuth2
	return tokenKey{kind: e.Auth.Kind, tokenURL: o.TokenURL, clientID: o.ClientID, scopes: strings.Join(o.Scopes, " "),
		secret: sha256.Sum256(o.ClientSecret), refresh: sha256.Sum256(o.RefreshToken)}
}

// tokens returns e's token cache, a new one if e's OAuth2 settings changed.
func (c *Client) tokens(e *Endpoint) *tokenCache {
	key := keyOf(e)
	c.mu.Lock()
	defer c.mu.Unlock()
	if tc, ok := c.tokenCaches[e.Name]; ok && tc.key == key {
		return tc
	}
	o := e.Auth.OAuth2
	tc := &tokenCache{key: key, lock: make(chan struct{}, 1), refresh: o.RefreshToken}
	if e.Auth.Kind == AuthOAuth2ClientCredentials {
		tc.cc = &clientcredentials.Config{ClientID: o.ClientID, ClientSecret: string(o.ClientSecret), TokenURL: o.TokenURL, Scopes: o.Scopes}
	} else {
		tc.rt = &oauth2.Config{ClientID: o.ClientID, ClientSecret: string(o.ClientSecret), Endpoint: oauth2.Endpoint{TokenURL: o.TokenURL}}
	}
	c.tokenCaches[e.Name] = tc
	return tc
}

// token returns an access token for e: the cached one while it is fresh
// and is not stale (the one a 401 just refused), else a new one from the
// token endpoint, reached through tr. A stale token is replaced only
// within the refetch allowance (refetchBurst), else errRefetchLimited.
func (c *Client) token(ctx context.Context, e *Endpoint, tr http.RoundTripper, stale []byte) ([]byte, error) {
	tc := c.tokens(e)
	select {
	case tc.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	defer func() { <-tc.lock }()
	if tc.token != nil && string(tc.token) != string(stale) && (tc.renewAt.IsZero() || c.now().Before(tc.renewAt)) {
		return tc.token, nil
	}
	if stale != nil && string(tc.token) == string(stale) {
		now := c.now()
		full := tc.refetchFull
		if full.Before(now) {
			full = now
		}
		if full.Sub(now) > (refetchBurst-1)*refetchInterval {
			return nil, errRefetchLimited
		}
		tc.refetchFull = full.Add(refetchInterval)
	}
	tc.token = nil
	o := e.Auth.OAuth2
	hc := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	fctx := context.WithValue(ctx, oauth2.HTTPClient, hc)
	fetched := c.now()
	var tok *oauth2.Token
	var err error
	if tc.cc != nil {
		tok, err = tc.cc.Token(fctx)
	} else {
		tok, err = tc.rt.TokenSource(fctx, &oauth2.Token{RefreshToken: string(tc.refresh)}).Token()
	}
	if err != nil {
		return nil, &TokenError{Endpoint: e.Name, URL: o.TokenURL, Err: tokenCause(err)}
	}
	access := []byte(tok.AccessToken)
	if len(access) == 0 || hasControl(access) {
		return nil, &TokenError{Endpoint: e.Name, URL: o.TokenURL, Err: errors.New("the answer holds no usable access token")}
	}
	if err := o.OnToken(access, tok.Expiry); err != nil {
		return nil, &TokenError{Endpoint: e.Name, URL: o.TokenURL, Err: err}
	}
	if tc.rt != nil && tok.RefreshToken != "" && tok.RefreshToken != string(tc.refresh) {
		tc.refresh = []byte(tok.RefreshToken)
		if err := o.OnRefreshToken(ctx, tc.refresh); err != nil {
			c.logger.Warn("the rotated refresh token could not be saved; it is used until the configuration is reloaded",
				"endpoint", e.Name, "error", err)
		}
	}
	tc.token, tc.renewAt = access, time.Time{}
	if !tok.Expiry.IsZero() {
		tc.renewAt = tok.Expiry.Add(-min(tokenRenewMargin, tok.Expiry.Sub(fetched)/4))
	}
	return access, nil
}

// TokenError reports an access token that could not be fetched. Err says
// why, never with a secret or the token endpoint's body; errors.As finds a
// *BlockedAddressError in it.
type TokenError struct {
	Endpoint string
	URL      string // the token URL
	Err      error
}

func (e *TokenError) Error() string {
	return fmt.Sprintf("endpoint %q: fetching an access token from %s: %v", e.Endpoint, e.URL, e.Err)
}

func (e *TokenError) Unwrap() error { return e.Err }

// tokenCause keeps what may be said of a failed token fetch: the HTTP
// status and RFC 6749 error code, not the body (the server's text), and
// the cause of a transport error without its URL.
func tokenCause(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		msg := "the token endpoint answered"
		if re.Response != nil {
			msg += fmt.Sprintf(" HTTP %d", re.Response.StatusCode)
		}
		if validScope(re.ErrorCode) && len(re.ErrorCode) <= 64 {
			msg += " " + re.ErrorCode
		}
		return errors.New(msg)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// drain reads a little of a body that is not wanted, so that its
// connection can be reused, and closes it.
func drain(body io.ReadCloser) {
	io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	body.Close()
}
