package throttle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestRefillNeverOverflows(t *testing.T) {
	tests := []struct {
		name   string
		p      Policy
		tokens int64
		idle   time.Duration
		want   int64
	}{
		{"IdleForCenturies", Policy{Capacity: MaxTokens, RefillTokens: MaxTokens, RefillPeriod: time.Nanosecond}, -MaxTokens, 290 * 365 * 24 * time.Hour, MaxTokens},
		{"DeepDebtSlowRefill", Policy{Capacity: 10, RefillTokens: 1, RefillPeriod: 24 * time.Hour}, -MaxTokens, 48 * time.Hour, -MaxTokens + 2},
		{"StepwiseHugeSteps", Policy{Capacity: MaxTokens, RefillTokens: MaxTokens, RefillPeriod: time.Nanosecond, Refill: RefillStepwise}, 0, time.Hour, MaxTokens},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := Bucket{Tokens: tt.tokens, RefilledAt: t0}
			b.Refill(tt.p, t0.Add(tt.idle))
			require.Equal(t, tt.want, b.Tokens)
		})
	}
}

func TestUntilTokensOfDeepDebtIsBounded(t *testing.T) {
	p := Policy{Capacity: MaxTokens, RefillTokens: 1, RefillPeriod: 24 * time.Hour}
	b := Bucket{Tokens: -MaxTokens, RefilledAt: t0}
	require.Equal(t, maxDuration, b.untilTokens(p, 1, t0))
}

// FuzzRefillIsExact checks the refill arithmetic on arbitrary policies and
// times: refilling in two steps gives the same bucket as in one (no fraction
// is lost or invented), the balance never passes the capacity, and the wait
// UntilTokens reports is exact to the nanosecond.
func FuzzRefillIsExact(f *testing.F) {
	f.Add(int64(100), int64(2), int64(time.Minute), false, int64(-15), int64(3*time.Second), int64(7*time.Second), int64(1))
	f.Add(int64(5000), int64(7), int64(3*time.Second), false, int64(0), int64(1), int64(999_999_999), int64(5000))
	f.Add(int64(10), int64(10), int64(10*time.Second), true, int64(0), int64(1500*time.Millisecond), int64(8*time.Second), int64(10))
	f.Fuzz(func(t *testing.T, capacity, rate, period int64, stepwise bool, tokens, d1, d2, need int64) {
		if capacity < 1 || capacity > 1e9 || rate < 1 || rate > 1e9 || period < 1 || period > int64(48*time.Hour) ||
			tokens > capacity || tokens < -1e9 || d1 < 0 || d2 < 0 || d1 > int64(1e15) || d2 > int64(1e15) ||
			need < 1 || need > capacity {
			t.Skip()
		}
		p := Policy{Name: "F", Capacity: capacity, RefillTokens: rate, RefillPeriod: time.Duration(period)}
		if stepwise {
			p.Refill = RefillStepwise
		}
		start := Bucket{Tokens: tokens, RefilledAt: t0}

		two := start
		two.Refill(p, t0.Add(time.Duration(d1)))
		two.Refill(p, t0.Add(time.Duration(d1+d2)))
		one := start
		one.Refill(p, t0.Add(time.Duration(d1+d2)))
		require.Equal(t, one.Tokens, two.Tokens)
		require.Equal(t, one.Carry, two.Carry)
		require.LessOrEqual(t, one.Tokens, capacity)

		now := t0.Add(time.Duration(d1))
		b := start
		b.Refill(p, now)
		wait := b.untilTokens(p, need, now)
		if wait == 0 {
			require.GreaterOrEqual(t, b.Tokens, need)
			return
		}
		if wait == maxDuration {
			return
		}
		at, before := b, b
		at.Refill(p, now.Add(wait))
		before.Refill(p, now.Add(wait-1))
		require.GreaterOrEqual(t, at.Tokens, need, "after the wait")
		require.Less(t, before.Tokens, need, "1 ns before the wait")
	})
}
