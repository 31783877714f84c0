package web

import (
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// clientIP returns the address of the client that sent r: the socket peer
// unless it is a trusted proxy, then the first address of the chain in
// header (canonical form, e.g. X-Forwarded-For), read from the right, that
// is not one. An entry that does not parse ends the walk at the last
// trusted hop.
func clientIP(r *http.Request, trusted []netip.Prefix, header string) netip.Addr {
	peer := parseHost(r.RemoteAddr)
	if !peer.IsValid() || !isTrusted(peer, trusted) {
		return peer
	}
	client := peer
	hops := r.Header.Values(header)
	for i := len(hops) - 1; i >= 0; i-- {
		parts := strings.Split(hops[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			a := parseHost(strings.TrimSpace(parts[j]))
			if !a.IsValid() {
				return client
			}
			client = a
			if !isTrusted(a, trusted) {
				return a
			}
		}
	}
	return client
}

// parseHost parses "ip", "ip:port" or "[ipv6]:port", unmapping IPv4-in-IPv6
// and dropping zones. It returns the zero Addr when s is none of those.
func parseHost(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone("")
	}
	return netip.Addr{}
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	return slices.ContainsFunc(trusted, func(p netip.Prefix) bool { return p.Contains(a) })
}

// limitIdentifier is the identifier of a client IP in the inbound limiter:
// an IPv4 address as is, an IPv6 address as its /64 (one subscriber's).
func limitIdentifier(a netip.Addr) string {
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
