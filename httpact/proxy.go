package httpact

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpproxy"
)

// ProxyError reports a request refused by its endpoint's proxy setting
// before anything was sent: a proxy address from the environment that
// actiongw does not use, or a plain http request with a credential that
// would pass through a proxy. Retrying cannot help.
type ProxyError struct {
	Reason string // never holds a URL's userinfo
}

func (e *ProxyError) Error() string { return e.Reason }

// CheckProxyURL checks a proxy address as Endpoint.Proxy takes it:
// "http://host:port", nothing more. A user name or password is refused
// (actiongw sends no proxy credentials: a password would sit in a plain
// file), and so is an https:// or socks proxy: actiongw speaks plain HTTP
// to the proxy, and an https endpoint's traffic is TLS inside the CONNECT
// tunnel. Its error never quotes the address.
func CheckProxyURL(raw string) error {
	_, err := parseProxyURL(raw)
	return err
}

// parseProxyURL is CheckProxyURL, returning the proxy as http://host:port
// with Host in the form net/http dials it.
func parseProxyURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return nil, errors.New("is empty")
	case err != nil:
		return nil, errors.New(`is not a URL (write "http://host:port")`)
	case u.User != nil:
		return nil, errors.New("must not contain a user name or password: actiongw sends no proxy credentials")
	case strings.EqualFold(u.Scheme, "https"):
		return nil, errors.New("must start with http://: actiongw speaks plain HTTP to the proxy " +
			"(an https endpoint's requests still cross it inside TLS, through CONNECT)")
	case !strings.EqualFold(u.Scheme, "http"):
		return nil, errors.New(`must start with http:// (write "http://host:port")`)
	case u.Opaque != "" || u.Hostname() == "":
		return nil, errors.New("must name a host")
	case u.Port() == "":
		return nil, errors.New("must name a port (http://host:port): proxies have no standard one")
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, errors.New("must be http://host:port alone, without a path, query or fragment")
	case strings.ContainsFunc(u.Hostname(), func(r rune) bool { return r >= 0x80 }):
		return nil, errors.New("must name its host in ASCII (its punycode form)")
	}
	if n, err := strconv.Atoi(u.Port()); err != nil || n < 1 || n > 65535 {
		return nil, errors.New("has an invalid port")
	}
	return &url.URL{Scheme: "http", Host: net.JoinHostPort(u.Hostname(), u.Port())}, nil
}

// CheckProxy checks an endpoint's proxy settings (Endpoint.Proxy and
// Endpoint.ProxyFromEnvironment) together with its base URL, its OAuth2
// token URL ("" for none) and its auth kind: both settings at once are
// refused, and so is a proxy with a plain http:// base URL that carries a
// credential, or with a plain http:// token URL, since the proxy could
// read what crosses it in the clear. The error is an *EndpointError whose
// Field is the config key to fix (Endpoint is left empty). What the
// environment holds is checked at each request, where a plain http
// request with a credential that the environment's proxy would carry is
// refused with a *ProxyError.
func CheckProxy(proxy string, fromEnv bool, baseURL, tokenURL, authKind string) error {
	bad := func(field, reason string) error { return &EndpointError{Field: field, Reason: reason} }
	if proxy == "" {
		return nil
	}
	if fromEnv {
		return bad("proxy", "set either proxy or use_env_proxy, not both")
	}
	if err := CheckProxyURL(proxy); err != nil {
		return bad("proxy", err.Error())
	}
	if plainHTTP(baseURL) && sendsCredential(authKind) {
		return bad("proxy", "the base_url is plain http://, so through a proxy the request and its credential "+
			"would be readable by the proxy: use an https:// base_url (the proxy then sees only CONNECT host:port), "+
			`or auth = "none"`)
	}
	if plainHTTP(tokenURL) {
		return bad("token_url", "is plain http://, so through the proxy the client secret and the tokens "+
			"would be readable by it: use https://")
	}
	return nil
}

func plainHTTP(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && strings.EqualFold(u.Scheme, "http")
}

// ProxyFor returns the host and port of the proxy that a request to target
// goes through with the given settings (Endpoint.Proxy and
// Endpoint.ProxyFromEnvironment), reading this process's environment now;
// "" for none, and for a proxy address that is not used (a request then
// fails, saying why), so that it never names a proxy credential.
func ProxyFor(proxy string, fromEnv bool, target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return ""
	}
	s := proxySetting{fixed: proxy, fromEnv: fromEnv}
	if fromEnv {
		s.env = environmentProxy()
	}
	p, err := newProxyRoute(s, false).pick(u)
	if p == nil || err != nil {
		return ""
	}
	return p.Host
}

// proxySetting is what decides an endpoint's proxies; it keys the
// endpoint's transport, so that a reload, or a credential added to a plain
// http endpoint, makes a new one.
type proxySetting struct {
	fixed      string           // Endpoint.Proxy
	fromEnv    bool             // Endpoint.ProxyFromEnvironment
	env        httpproxy.Config // the environment's, when fromEnv
	credential bool             // the endpoint's requests carry a credential
}

func (e *Endpoint) proxySetting() proxySetting {
	s := proxySetting{fixed: e.Proxy, fromEnv: e.ProxyFromEnvironment,
		credential: sendsCredential(e.Auth.Kind)}
	if s.fromEnv {
		s.env = environmentProxy()
	}
	return s
}

// environmentProxy reads HTTPS_PROXY, HTTP_PROXY and NO_PROXY (or their
// lower-case forms). actiongw is never a CGI program, where HTTP_PROXY
// could come from a request header, so REQUEST_METHOD is not looked at.
func environmentProxy() httpproxy.Config {
	c := *httpproxy.FromEnvironment()
	c.CGI = false
	return c
}

// proxyRoute decides, for each request URL, whether it goes through a
// proxy and which, and knows the proxies' addresses for the dial.
type proxyRoute struct {
	// proxies holds the proxy for each scheme of request URL, and errs
	// why a scheme's proxy setting is not used.
	proxies map[string]*url.URL
	errs    map[string]error
	// exempt reports a URL that goes direct although its scheme has a
	// proxy (NO_PROXY, loopback); nil exempts none.
	exempt                   func(*url.URL) bool
	credential, allowPrivate bool
}

func newProxyRoute(s proxySetting, allowPrivate bool) *proxyRoute {
	r := &proxyRoute{proxies: map[string]*url.URL{}, errs: map[string]error{},
		credential: s.credential, allowPrivate: allowPrivate}
	switch {
	case s.fixed != "":
		p, err := parseProxyURL(s.fixed)
		for _, scheme := range []string{"http", "https"} {
			if err != nil {
				r.errs[scheme] = &ProxyError{Reason: "proxy " + err.Error()}
			}
			r.proxies[scheme] = p
		}
	case s.fromEnv:
		for scheme, v := range map[string]string{"http": s.env.HTTPProxy, "https": s.env.HTTPSProxy} {
			if v == "" {
				continue
			}
			if !strings.Contains(v, "://") {
				v = "http://" + v // as httpproxy reads "host:port"
			}
			p, err := parseProxyURL(v)
			if err != nil {
				name := strings.ToUpper(scheme) + "_PROXY"
				r.errs[scheme] = &ProxyError{Reason: fmt.Sprintf("%s (or %s) in actiongw's environment %v",
					name, strings.ToLower(name), err)}
				continue
			}
			r.proxies[scheme] = p
		}
		// httpproxy decides only the exemptions here (NO_PROXY, loopback):
		// the stand-in proxies below are never used.
		const standIn = "http://proxy.invalid:1"
		match := (&httpproxy.Config{HTTPProxy: standIn, HTTPSProxy: standIn, NoProxy: s.env.NoProxy}).ProxyFunc()
		r.exempt = func(u *url.URL) bool {
			p, err := match(u)
			return p == nil && err == nil
		}
	}
	return r
}

// pick returns the proxy a request to u goes through, nil for none.
func (r *proxyRoute) pick(u *url.URL) (*url.URL, error) {
	if r.exempt != nil && r.exempt(u) {
		return nil, nil
	}
	if err := r.errs[u.Scheme]; err != nil {
		return nil, err
	}
	return r.proxies[u.Scheme], nil
}

// forURL is the transport's Proxy: pick, refusing what must not cross the
// proxy. A plain http request with a credential would show the credential
// to the proxy. The proxy resolves the host, so the guard never sees its
// address; a literal address, or a localhost name, is checked here.
func (r *proxyRoute) forURL(u *url.URL) (*url.URL, error) {
	p, err := r.pick(u)
	if p == nil || err != nil {
		return nil, err
	}
	if u.Scheme != "https" && r.credential {
		return nil, &ProxyError{Reason: fmt.Sprintf("a plain http:// request through the proxy %s would carry the "+
			"endpoint's credential where the proxy can read it: refused (use https, or list the host in NO_PROXY)", p.Host)}
	}
	if err := checkProxiedHost(u.Hostname(), r.allowPrivate); err != nil {
		return nil, err
	}
	return p, nil
}

// isProxy reports whether addr, as the transport dials it, is one of the
// route's proxies.
func (r *proxyRoute) isProxy(addr string) bool {
	for _, p := range r.proxies {
		if p != nil && p.Host == addr {
			return true
		}
	}
	return false
}

// checkProxiedHost checks the host of a request that a proxy will
// connect to: a literal address against the denied ranges, a localhost
// name (RFC 6761) as loopback. A name is not resolved: the proxy resolves
// it, maybe with another DNS, so a local answer would prove nothing about
// where it connects.
func checkProxiedHost(host string, allowPrivate bool) error {
	a, err := netip.ParseAddr(host)
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	switch {
	case err == nil:
	case numericLabel(h[strings.LastIndexByte(h, '.')+1:]):
		// An address in another spelling ("127.1", "2130706433",
		// "0x7f.0.0.1"), which the proxy's resolver reads as the C
		// library does (inet_aton), as URL parsers do (WHATWG).
		var ok bool
		if a, ok = inetAton(h); !ok {
			return &ProxyError{Reason: fmt.Sprintf("%s reads as an IPv4 address to a resolver, and is not a valid one", host)}
		}
	case h == "localhost" || strings.HasSuffix(h, ".localhost"):
		a = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	default:
		return nil
	}
	if r, denied := classify(a); denied && !(r.allowable && allowPrivate) {
		return &BlockedAddressError{Host: host, Addr: a.Unmap(), Range: r.name, Allowable: r.allowable}
	}
	return nil
}

// numericLabel reports whether a host's last label makes it an IPv4
// address to a URL parser: all decimal digits, or 0x and hex digits.
func numericLabel(l string) bool {
	if rest, ok := strings.CutPrefix(l, "0x"); ok {
		return strings.Trim(rest, "0123456789abcdef") == ""
	}
	return l != "" && strings.Trim(l, "0123456789") == ""
}

// inetAton parses s as inet_aton(3) does: one to four parts, each
// decimal, octal (a leading 0) or hex (0x), the last filling the
// remaining bytes.
func inetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v [4]uint64
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 0, 32) // base 0: 0x hex, 0 octal
		if err != nil || p == "" || strings.HasPrefix(p, "0b") || strings.HasPrefix(p, "0o") || strings.Contains(p, "_") {
			return netip.Addr{}, false
		}
		v[i] = n
	}
	last := len(parts) - 1
	for i := range last {
		if v[i] > 0xff {
			return netip.Addr{}, false
		}
	}
	if v[last] >= 1<<(8*(4-last)) {
		return netip.Addr{}, false
	}
	n := v[last]
	for i := range last {
		n |= v[i] << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// dialer returns the transport's dial function for an endpoint: a proxy
// of route is dialled as the person who configured it chose, loopback and
// private addresses included (a local proxy such as cntlm is the usual
// case), while ranges never allowable (link-local, ...) stay refused;
// anything else passes the endpoint's own guard.
func (c *Client) dialer(allowPrivate bool, route *proxyRoute) func(ctx context.Context, network, addr string) (net.Conn, error) {
	direct := &guard{allowPrivate: allowPrivate, lookup: c.lookup, dial: c.dial}
	proxy := &guard{allowPrivate: true, lookup: c.lookup, dial: c.dial}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if !route.isProxy(addr) {
			return direct.DialContext(ctx, network, addr)
		}
		conn, err := proxy.DialContext(ctx, network, addr)
		if err != nil {
			return nil, fmt.Errorf("the proxy %s: %w", addr, err)
		}
		return conn, nil
	}
}

// connectAnswered turns a proxy's answer to CONNECT into an error unless
// it opened the tunnel. The status line is the proxy's text: clipped.
func connectAnswered(proxy, target string, resp *http.Response) error {
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	status := strings.ToValidUTF8(resp.Status, "?")
	status = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, status)
	if len(status) > 100 {
		status = strings.ToValidUTF8(status[:100], "") + "..."
	}
	msg := fmt.Sprintf("the proxy %s refused CONNECT %s: %s", proxy, target, status)
	switch resp.StatusCode {
	case http.StatusProxyAuthRequired:
		return &ProxyError{Reason: msg + " (actiongw sends no proxy credentials)"}
	case http.StatusForbidden, http.StatusMethodNotAllowed:
		return &ProxyError{Reason: msg} // the proxy's policy: no retry changes it
	}
	return errors.New(msg) // 502, 503, 504: the proxy could not reach the host, maybe for now
}

// connectTunnel asks the proxy on conn for a tunnel to target, as the
// transport does, for Probe.
func connectTunnel(ctx context.Context, conn net.Conn, proxy, target string) error {
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: target}, Host: target, Header: http.Header{}}
	err := req.Write(conn)
	var resp *http.Response
	if err == nil {
		// The server of the tunnel speaks only once spoken to: nothing
		// past the answer is buffered away.
		resp, err = http.ReadResponse(bufio.NewReader(io.LimitReader(conn, 64<<10)), req)
	}
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("the proxy %s: CONNECT %s: %w", proxy, target, err)
	}
	// The body, if any, is left unread: the caller closes conn.
	return connectAnswered(proxy, target, resp)
}
