package web

import (
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClientIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	tests := []struct {
		name string
		peer string
		xff  []string
		want string
	}{
		{"PeerUntrusted", "203.0.113.1:5", []string{"198.51.100.1"}, "203.0.113.1"},
		{"TrustedNoHeader", "10.0.0.1:5", nil, "10.0.0.1"},
		{"TrustedOneHop", "10.0.0.1:5", []string{"198.51.100.1"}, "198.51.100.1"},
		{"TrustedChain", "10.0.0.1:5", []string{"1.1.1.1, 198.51.100.1, 10.0.0.2"}, "198.51.100.1"},
		{"SeveralHeaderLines", "10.0.0.1:5", []string{"1.1.1.1", "198.51.100.1, 10.9.9.9"}, "198.51.100.1"},
		{"AllTrusted", "10.0.0.1:5", []string{"10.1.1.1, 10.2.2.2"}, "10.1.1.1"},
		{"GarbageHop", "10.0.0.1:5", []string{"1.1.1.1, <script>, 10.0.0.3"}, "10.0.0.3"},
		{"HopWithPort", "[::1]:5", []string{"[2001:db8::1]:443"}, "2001:db8::1"},
		{"Zone", "10.0.0.1:5", []string{"fe80::1%eth0"}, "fe80::1"},
		{"Mapped", "10.0.0.1:5", []string{"::ffff:198.51.100.3"}, "198.51.100.3"},
		{"BadPeer", "pipe", []string{"198.51.100.1"}, "invalid IP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.peer
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			require.Equal(t, tt.want, clientIP(r, trusted, "X-Forwarded-For").String())
		})
	}
}

func TestLimitIdentifier(t *testing.T) {
	require.Equal(t, "198.51.100.1", limitIdentifier(netip.MustParseAddr("198.51.100.1")))
	require.Equal(t, "2001:db8:1:2::/64", limitIdentifier(netip.MustParseAddr("2001:db8:1:2:3:4:5:6")))
}

func FuzzClientIP(f *testing.F) {
	f.Add("10.0.0.1:5", "1.1.1.1, 198.51.100.1")
	f.Add("203.0.113.1:5", "garbage")
	f.Add("[::1]:1", "[2001:db8::1]:443, fe80::1%eth0")
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	f.Fuzz(func(t *testing.T, peer, xff string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = peer
		r.Header.Set("X-Forwarded-For", xff)
		got := clientIP(r, trusted, "X-Forwarded-For")
		p := parseHost(peer)
		if !isTrusted(p, trusted) {
			// An untrusted peer is the client, whatever the header says.
			require.Equal(t, p, got)
		}
		if got.IsValid() {
			require.NotEmpty(t, limitIdentifier(got))
		}
	})
}
