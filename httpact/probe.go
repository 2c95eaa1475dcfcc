package httpact

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
)

// Probe connects to e's origin as a request would, through the same address
// guard and the same proxy or Via, and completes the TLS handshake for https, then
// hangs up without sending a request or a credential: what `actiongw check`
// reports for an endpoint. Through a proxy, an https origin is reached with
// CONNECT; for a plain http one only the proxy is connected to, since the
// proxy connects to the origin for each request. A denied address is a
// *BlockedAddressError; an invalid endpoint an *EndpointError; a proxy
// setting a request would refuse a *ProxyError.
func (c *Client) Probe(ctx context.Context, e *Endpoint) error {
	base, err := e.validate()
	if err != nil {
		return err
	}
	o := origin(base)
	hostport := o[strings.Index(o, "://")+3:]
	route := newProxyRoute(e.proxySetting(), e.AllowPrivate)
	proxy, err := route.forURL(base)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", o, err)
	}
	addr := hostport
	if proxy != nil {
		addr = proxy.Host
	}
	conn, err := c.dialFor(e, base, route)(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", o, err)
	}
	defer conn.Close()
	if proxy != nil && base.Scheme == "https" {
		if err := connectTunnel(ctx, conn, proxy.Host, hostport); err != nil {
			return fmt.Errorf("connect to %s: %w", o, err)
		}
	}
	if base.Scheme != "https" {
		return nil
	}
	cfg := e.tlsConfig()
	cfg.ServerName = base.Hostname()
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("TLS handshake with %s: %w", o, tlsHint(e, err))
	}
	return tc.Close()
}

// ProbeToken fetches an access token for e, an endpoint with auth =
// "oauth2_client_credentials", as its first request would: from its token
// URL, through the same address guard, proxy and client certificate, with
// its client id, secret and scopes. That is what `actiongw check` reports
// of them, with no request sent to the endpoint itself. A refresh token is
// never used here: a server that rotates it on use would leave the
// configured one stale. The error is a *TokenError, which holds neither
// the secret nor the token endpoint's text; for another kind of endpoint
// it is an *EndpointError.
func (c *Client) ProbeToken(ctx context.Context, e *Endpoint) error {
	base, err := e.validate()
	if err != nil {
		return err
	}
	if e.Auth.Kind != AuthOAuth2ClientCredentials {
		return &EndpointError{Endpoint: e.Name, Field: "auth", Reason: "only " + AuthOAuth2ClientCredentials + " fetches a token without a side effect"}
	}
	if err := e.checkSecrets(); err != nil {
		return err
	}
	_, err = c.token(ctx, e, c.transport(e, base), nil)
	return err
}
