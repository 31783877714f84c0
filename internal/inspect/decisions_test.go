package inspect_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

func TestDecisionsPerPolicy(t *testing.T) {
	ctx := context.Background()
	small := throttle.PerMinute("SMALL", 2, 2)
	slow := throttle.Policy{Name: "SLOW", Capacity: 100, RefillTokens: 100, RefillPeriod: time.Minute, MinInterval: 10 * time.Second}
	quiet := throttle.PerMinute("QUIET", 5, 5)
	e := throttletest.NewMemEnv(t, small, slow, quiet)
	take := func(policy, id string) bool {
		t.Helper()
		d, err := e.Limiter.Take(ctx, "t", throttle.Charge{Key: throttle.Key{Policy: policy, Env: "prod", Identifier: id}, Cost: 1})
		require.NoError(t, err)
		return d.Allowed
	}
	// Before the window: one take of SMALL that must not count.
	require.True(t, take("SMALL", "old"))
	e.Clock.Advance(2 * time.Hour)
	since := e.Clock.Now()

	// SMALL: two admitted, then three refused (empty).
	for i, want := range []bool{true, true, false, false, false} {
		require.Equal(t, want, take("SMALL", "a"), "take %d", i)
	}
	// SLOW: one admitted, one refused (cooldown) on one key, one admitted on another.
	require.True(t, take("SLOW", "x"))
	require.False(t, take("SLOW", "x"))
	require.True(t, take("SLOW", "y"))
	require.NoError(t, e.Limiter.FlushRefusals(ctx))

	got, err := e.Reader.Decisions(ctx, []string{"SLOW", "QUIET", "SMALL", "SMALL"}, since)
	require.NoError(t, err)
	require.Equal(t, []inspect.PolicyDecisions{
		{Policy: "SMALL", Admitted: 2, Refused: map[throttle.LedgerReason]int64{throttle.LedgerRefusedEmpty: 3}},
		{Policy: "SLOW", Admitted: 2, Refused: map[throttle.LedgerReason]int64{throttle.LedgerRefusedCooldown: 1}},
	}, got, "the most refused first; QUIET had no decision")
	require.Equal(t, int64(3), got[0].RefusedTotal())
	require.Equal(t, int64(600), got[0].RefusedPerMille())
	require.Equal(t, int64(333), got[1].RefusedPerMille())
}
