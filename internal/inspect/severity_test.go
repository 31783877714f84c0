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

var (
	gate = throttle.Policy{Name: "SIFEN_RECEPCION_LOTE", Capacity: 1, RefillTokens: 1, RefillPeriod: 10 * time.Second, MinInterval: 10 * time.Second}
	fill = throttle.Policy{Name: "FILL", Capacity: 100, RefillTokens: 100, RefillPeriod: time.Minute}
)

// What was seen: the cards counted the level stored at the last write while
// the rows showed the bucket refilled.
func TestCountNowCountsTheLevelNow(t *testing.T) {
	ctx := context.Background()
	e := throttletest.NewMemEnv(t, fill)
	k := throttle.Key{Policy: fill.Name, Env: "prod", Identifier: "a"}
	require.True(t, e.Take(k, 95).Allowed)
	e.Clock.Advance(time.Minute) // full again

	stored, err := e.Reader.CountBySeverity(ctx, inspect.Filter{})
	require.NoError(t, err)
	require.Equal(t, map[throttle.Severity]int64{throttle.SeverityCritical: 1}, stored)

	now, err := e.Reader.CountNow(ctx, inspect.Filter{})
	require.NoError(t, err)
	require.Equal(t, int64(1), now.BySeverity[throttle.SeverityHealthy])
	require.Equal(t, int64(0), now.BySeverity[throttle.SeverityCritical])
	require.Equal(t, int64(1), now.Total)
	require.Equal(t, e.State(k).Severity, throttle.SeverityHealthy)
}

func TestListFiltersAndSortsBySeverityNow(t *testing.T) {
	ctx := context.Background()
	e := throttletest.NewMemEnv(t, fill, gate)
	a := throttle.Key{Policy: fill.Name, Env: "prod", Identifier: "a"}
	b := throttle.Key{Policy: fill.Name, Env: "prod", Identifier: "b"}
	c := throttle.Key{Policy: gate.Name, Env: "test", Identifier: "c"}
	require.True(t, e.Take(a, 95).Allowed) // Critical
	require.True(t, e.Take(b, 60).Allowed) // Medium
	require.True(t, e.Take(c, 1).Allowed)  // cooling down, Healthy

	page, err := e.Reader.List(ctx, inspect.Filter{Severity: throttle.SeverityCritical})
	require.NoError(t, err)
	require.Len(t, page.States, 1)
	require.Equal(t, a, page.States[0].Key)

	page, err = e.Reader.List(ctx, inspect.Filter{Condition: throttle.ConditionCoolingDown})
	require.NoError(t, err)
	require.Len(t, page.States, 1)
	require.Equal(t, c, page.States[0].Key)

	all, partial, err := e.Reader.ListAll(ctx, inspect.Filter{})
	require.NoError(t, err)
	require.False(t, partial)
	inspect.SortStates(all, inspect.SortSeverity)
	require.Equal(t, []throttle.Key{a, b, c}, []throttle.Key{all[0].Key, all[1].Key, all[2].Key})

	// Refilled: no longer Critical now, so the filter no longer finds it.
	e.Clock.Advance(time.Minute)
	page, err = e.Reader.List(ctx, inspect.Filter{Severity: throttle.SeverityCritical})
	require.NoError(t, err)
	require.Empty(t, page.States)
}
