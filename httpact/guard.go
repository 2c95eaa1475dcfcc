package httpact

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// BlockedAddressError reports a connection refused because an address the
// host resolved to is in a denied range.
type BlockedAddressError struct {
	Host  string     // the host name from the base URL
	Addr  netip.Addr // the address that was refused
	Range string     // "loopback", "private", "link-local", ...
	// Allowable is true when AllowPrivate on the endpoint would permit it.
	Allowable bool
}

func (e *BlockedAddressError) Error() string {
	msg := fmt.Sprintf("%s resolves to %s, which is in a denied range (%s)", e.Host, e.Addr, e.Range)
	if e.Allowable {
		msg += "; set allow_private on the endpoint to reach it"
	}
	return msg
}

// deniedRange is a range of addresses an endpoint may not reach; allowable
// ones become reachable with Endpoint.AllowPrivate.
type deniedRange struct {
	prefix    netip.Prefix
	name      string
	allowable bool
}

var deniedRanges = func() []deniedRange {
	list := []struct {
		cidr, name string
		allowable  bool
	}{
		{"0.0.0.0/8", "unspecified", false},
		{"10.0.0.0/8", "private", true},
		{"100.64.0.0/10", "shared address space", true},
		{"100.100.100.200/32", "cloud metadata", false},
		{"127.0.0.0/8", "loopback", true},
		{"169.254.0.0/16", "link-local", false},
		{"172.16.0.0/12", "private", true},
		{"192.0.0.0/24", "IETF protocol assignments", false},
		{"192.168.0.0/16", "private", true},
		{"198.18.0.0/15", "benchmarking", false},
		{"224.0.0.0/4", "multicast", false},
		{"240.0.0.0/4", "reserved", false}, // includes 255.255.255.255
		{"::/128", "unspecified", false},
		{"::1/128", "loopback", true},
		{"::/96", "IPv4-compatible", false},
		{"100::/64", "discard-only", false},
		{"fc00::/7", "unique-local", true},
		{"fd00:ec2::254/128", "cloud metadata", false},
		{"fe80::/10", "link-local", false},
		{"fec0::/10", "site-local", true},
		{"ff00::/8", "multicast", false},
	}
	out := make([]deniedRange, len(list))
	for i, r := range list {
		out[i] = deniedRange{netip.MustParsePrefix(r.cidr), r.name, r.allowable}
	}
	return out
}()

// Prefixes whose IPv6 addresses embed an IPv4 address that a gateway on the
// path may reach: NAT64 (RFC 6052) and 6to4 (RFC 3056).
var (
	nat64  = netip.MustParsePrefix("64:ff9b::/96")
	sixto4 = netip.MustParsePrefix("2002::/16")
)

// classify returns the denied range a is in, if any.
func classify(a netip.Addr) (deniedRange, bool) {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64.Contains(a):
			return classify(netip.AddrFrom4([4]byte(b[12:16])))
		case sixto4.Contains(a):
			return classify(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	// Longest match wins: ::1 is loopback, not IPv4-compatible.
	var best deniedRange
	found := false
	for _, r := range deniedRanges {
		if r.prefix.Contains(a) && (!found || r.prefix.Bits() > best.prefix.Bits()) {
			best, found = r, true
		}
	}
	return best, found
}

// guard dials only addresses outside the denied ranges, resolving a host
// name once and dialing the addresses it checked.
type guard struct {
	allowPrivate bool
	lookup       func(ctx context.Context, host string) ([]netip.Addr, error)
	dial         func(ctx context.Context, network, addr string) (net.Conn, error)
}

// DialContext is the transport's dial function.
func (g *guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("invalid port %q", portStr)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = g.lookup(ctx, host)
		if err != nil {
			return nil, err
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("%s has no addresses", host)
		}
	}
	// Refuse if any address is denied: a name that mixes public and
	// internal addresses is not one to trust.
	for _, a := range addrs {
		if r, denied := classify(a); denied && !(r.allowable && g.allowPrivate) {
			return nil, &BlockedAddressError{Host: host, Addr: a.Unmap(), Range: r.name, Allowable: r.allowable}
		}
	}
	var errs []error
	for _, a := range addrs {
		conn, err := g.dial(ctx, network, netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

func resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}
