package web_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/web"
)

func TestParseInboundTokens(t *testing.T) {
	hashed := web.HashToken("from-file")
	in := strings.Join([]string{
		"# monitors",
		"s3cr3t-monitor=1000/1m/10m",
		"",
		"base64pad==60, other=5/30s",
		"sha256:" + strings.ToUpper(hashed) + " = 7",
	}, "\n")
	got, err := web.ParseInboundTokens(strings.NewReader(in))
	require.NoError(t, err)
	want := []web.InboundToken{
		{Hash: web.HashToken("s3cr3t-monitor"), Limit: 1000, Window: time.Minute, Block: 10 * time.Minute},
		{Hash: web.HashToken("base64pad="), Limit: 60},
		{Hash: web.HashToken("other"), Limit: 5, Window: 30 * time.Second},
		{Hash: hashed, Limit: 7},
	}
	require.Equal(t, want, got)
}

func TestParseInboundTokensErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"NoLimit", "token", "TOKEN=LIMIT"},
		{"EmptyToken", "=5", "TOKEN=LIMIT"},
		{"LimitNotANumber", "t=many", "limit"},
		{"LimitZero", "t=0", "limit"},
		{"LimitTooBig", "t=10001", "limit"},
		{"BadWindow", "t=5/soon", "duration"},
		{"ZeroWindow", "t=5/0s", "duration"},
		{"TooManyParts", "t=5/1m/1m/1m", "LIMIT[/WINDOW[/BLOCK]]"},
		{"BadHash", "sha256:abc=5", "64 hex"},
		{"Twice", "t=5\nt=6", "twice"},
		{"Space", "a b=5", "spaces"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := web.ParseInboundTokens(strings.NewReader(tt.in))
			require.ErrorContains(t, err, tt.want)
			require.NotContains(t, err.Error(), "t=", "the error does not echo a raw token")
		})
	}
}

func FuzzParseInboundTokens(f *testing.F) {
	f.Add("s3cr3t=1000/1m/10m\n# c\nother=5")
	f.Add("sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08=60")
	f.Add("a==,=/,,\n\n=1/1/1")
	f.Fuzz(func(t *testing.T, s string) {
		tokens, err := web.ParseInboundTokens(strings.NewReader(s))
		if err != nil {
			return
		}
		// Whatever parses builds a valid inbound limiter.
		_, err = web.NewInbound(web.InboundConfig{IPLimit: 10, Tokens: tokens})
		require.NoError(t, err)
		// Written back in the hashed form, the tokens parse the same.
		var lines []string
		for _, tok := range tokens {
			require.Len(t, tok.Hash, 64)
			line := fmt.Sprintf("sha256:%s=%d", tok.Hash, tok.Limit)
			if tok.Window != 0 || tok.Block != 0 {
				line += "/" + tok.Window.String()
				if tok.Window == 0 {
					return // "0s" is not a window; nothing to compare
				}
			}
			if tok.Block != 0 {
				line += "/" + tok.Block.String()
			}
			lines = append(lines, line)
		}
		again, err := web.ParseInboundTokens(strings.NewReader(strings.Join(lines, "\n")))
		require.NoError(t, err)
		require.Equal(t, tokens, again)
	})
}

func TestNewInboundErrors(t *testing.T) {
	tests := []struct {
		name    string
		cfg     web.InboundConfig
		want    string
		wantErr error
	}{
		{"IPLimitZero", web.InboundConfig{}, "capacity", throttle.ErrInvalidPolicy},
		{"IPLimitTooBig", web.InboundConfig{IPLimit: 20000}, "rolling window", throttle.ErrInvalidPolicy},
		{"NegativeBlock", web.InboundConfig{IPLimit: 5, Block: -time.Second}, "negative", throttle.ErrInvalidPolicy},
		{"EnvTooLong", web.InboundConfig{IPLimit: 5, Env: strings.Repeat("e", 40)}, "env", throttle.ErrInvalidKey},
		{"TokenLimitZero", web.InboundConfig{IPLimit: 5, Tokens: []web.InboundToken{{Hash: web.HashToken("x")}}}, "capacity", throttle.ErrInvalidPolicy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := web.NewInbound(tt.cfg)
			require.ErrorContains(t, err, tt.want)
			require.ErrorIs(t, err, tt.wantErr)
		})
	}
}

func TestInboundPolicies(t *testing.T) {
	in, err := web.NewInbound(web.InboundConfig{IPLimit: 5, Block: time.Minute,
		Tokens: []web.InboundToken{{Hash: web.HashToken("t"), Limit: 9}}})
	require.NoError(t, err)
	r := in.Policies()
	p, err := r.Resolve(throttle.Key{Policy: web.PolicyInboundIP, Env: "prod", Identifier: "1.2.3.4"})
	require.NoError(t, err)
	require.Equal(t, throttle.Policy{Name: web.PolicyInboundIP, Refill: throttle.RefillRolling, Capacity: 5, RefillTokens: 5,
		RefillPeriod: time.Minute, RollingGrain: time.Second, BlockFor: time.Minute, Ledger: throttle.LedgerNoTakes,
		FailMode: throttle.FailOpen}, p, "the zero InboundConfig fails open")
	p, err = r.Resolve(throttle.Key{Policy: web.PolicyInboundToken, Env: "prod", Identifier: web.HashToken("t")})
	require.NoError(t, err)
	require.Equal(t, int64(9), p.Capacity)
	_, err = r.Resolve(throttle.Key{Policy: web.PolicyInboundToken, Env: "prod", Identifier: web.HashToken("gone")})
	require.ErrorIs(t, err, throttle.ErrUnknownPolicy)
	_, err = r.Resolve(throttle.Key{Policy: "P", Env: "prod", Identifier: "x"})
	require.ErrorIs(t, err, throttle.ErrUnknownPolicy)
}
