package httpact

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
)

// Probe connects to e's origin as a request would, through the same address
// guard, and completes the TLS handshake for https, then hangs up without
// sending a request or a credential: what `actiongw check` reports for an
// endpoint. A denied address is a *BlockedAddressError; an invalid endpoint
// an *EndpointError.
func (c *Client) Probe(ctx context.Context, e *Endpoint) error {
	base, err := e.validate()
	if err != nil {
		return err
	}
	o := origin(base)
	hostport := o[strings.Index(o, "://")+3:]
	g := &guard{allowPrivate: e.AllowPrivate, lookup: c.lookup, dial: c.dial}
	conn, err := g.DialContext(ctx, "tcp", hostport)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", o, err)
	}
	defer conn.Close()
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
