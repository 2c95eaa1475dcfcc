package httpact

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Via carries an endpoint's TCP connections from somewhere other than
// this host: in actiongw, the server of an SSH target, which opens them
// as ssh -L does (a direct-tcpip channel of its pooled connection). A
// Via is told apart from another by its address, so that a new one (a
// reloaded configuration) gets new connections.
type Via struct {
	// Name names the far side in messages: the SSH target.
	Name string
	// Dial connects to addr, "host:port" with the host as configured (the
	// far side resolves a name), from the far side. Its errors should say
	// where and why; they are returned as they are.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
}

// viaRoutes is how an endpoint with a Via (its own, or its token URL's)
// reaches each host and port it may connect to, by lower-case
// "host:port": through a Via, or directly (nil) through the guard. No
// other address is dialled.
type viaRoutes map[string]*Via

// viaRoutes returns e's routes, nil when neither e nor its token URL
// goes through a Via; base is e's parsed base URL.
func (e *Endpoint) viaRoutes(base *url.URL) viaRoutes {
	var tokenVia *Via
	var token *url.URL
	if o := e.Auth.OAuth2; o != nil {
		tokenVia = o.Via
		token, _ = url.Parse(o.TokenURL) // checked by validate
	}
	if e.Via == nil && tokenVia == nil {
		return nil
	}
	r := viaRoutes{hostPort(base): e.Via}
	if token != nil {
		r[hostPort(token)] = tokenVia
	}
	return r
}

// hostPort is u's "host:port", lower case, the default port explicit.
func hostPort(u *url.URL) string {
	o := origin(u)
	return o[strings.Index(o, "://")+3:]
}

// checkVia checks e's Via settings: no proxy with one, an ASCII host
// (a name goes to the far side as it is), no literal address that stays
// refused (link-local, metadata, ...; loopback and private are the far
// side's and allowed), and one route per host and port.
func (e *Endpoint) checkVia(base *url.URL) error {
	o := e.Auth.OAuth2
	if e.Via == nil && (o == nil || o.Via == nil) {
		return nil
	}
	if e.Proxy != "" || e.ProxyFromEnvironment {
		return e.invalid("via", "goes through an SSH target, not together with a proxy (proxy or use_env_proxy)")
	}
	check := func(field string, via *Via, u *url.URL) error {
		if via == nil {
			return nil
		}
		if via.Dial == nil {
			return e.invalid(field, "has no dial function")
		}
		if err := CheckViaURL(u.String()); err != nil {
			return e.invalid(field, "%v", err)
		}
		return nil
	}
	if err := check("via", e.Via, base); err != nil {
		return err
	}
	if o != nil {
		token, err := url.Parse(o.TokenURL)
		if err != nil {
			return e.invalid("token_url", "is not a URL")
		}
		if err := check("token_via", o.Via, token); err != nil {
			return err
		}
		if hostPort(token) == hostPort(base) && o.Via != e.Via {
			return e.invalid("token_via", "the token URL has the base URL's host and port, so it must go the same way (token_via = via)")
		}
	}
	return nil
}

// CheckViaURL checks a URL that an endpoint's Via carries (its base URL
// or token URL): its host in ASCII, since the far side resolves it as it
// is, and not a literal address that stays refused there (link-local,
// cloud metadata, ...; loopback and private ones are the far side's).
func CheckViaURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("is not a URL")
	}
	host := u.Hostname()
	if strings.ContainsFunc(host, func(r rune) bool { return r >= 0x80 }) {
		return errors.New("must name its host in ASCII (its punycode form): the SSH target resolves it as it is")
	}
	return checkProxiedHost(host, true)
}

// SameHostPort reports whether two URLs name the same host and port,
// the default port made explicit; false when one does not parse.
func SameHostPort(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Host != "" && hostPort(ua) == hostPort(ub)
}

// dialFor returns the dial function of e's connections: c.dialer, behind
// e's Via routes when it has any.
func (c *Client) dialFor(e *Endpoint, base *url.URL, route *proxyRoute) func(ctx context.Context, network, addr string) (net.Conn, error) {
	dial := c.dialer(e.AllowPrivate, route)
	if r := e.viaRoutes(base); r != nil {
		dial = r.dialer(e.Name, dial)
	}
	return dial
}

// dialer returns the transport's dial function over routes: a Via's
// address through it, a direct one through direct, any other refused.
func (r viaRoutes) dialer(endpoint string, direct func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		via, ok := r[strings.ToLower(addr)]
		switch {
		case !ok:
			return nil, fmt.Errorf("endpoint %q connects only to its base URL's and token URL's host and port, not %s", endpoint, addr)
		case via == nil:
			return direct(ctx, network, addr)
		}
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if err := checkProxiedHost(host, true); err != nil {
			return nil, err
		}
		conn, err := via.Dial(ctx, addr)
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, err
		}
		return conn, nil
	}
}
