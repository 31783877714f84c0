package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

func sevEnv(t *testing.T, ps ...throttle.Policy) *throttletest.Env {
	t.Helper()
	byName := map[string]throttle.Policy{}
	for _, p := range ps {
		byName[p.Name] = p
	}
	res := throttle.ResolverFunc(func(k throttle.Key) (throttle.Policy, error) {
		if p, ok := byName[k.Policy]; ok {
			return p, nil
		}
		return throttle.Policy{}, throttle.ErrUnknownPolicy
	})
	return throttletest.NewEnv(t, func(_ *testing.T, now throttle.Clock) throttle.Store {
		return throttletest.NewMemStore(now)
	}, res, throttle.Config{})
}

var (
	gate = throttle.Policy{Name: "SIFEN_RECEPCION_LOTE", Capacity: 1, RefillTokens: 1, RefillPeriod: 10 * time.Second, MinInterval: 10 * time.Second}
	fill = throttle.Policy{Name: "FILL", Capacity: 100, RefillTokens: 100, RefillPeriod: time.Minute}
)

func transitions(cs []throttle.SeverityChange) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.From.String()+">"+c.To.String())
	}
	return out
}

// What was seen: a one-token cooldown bucket went Critical (and alerted) on
// every normal send.
func TestCooldownGateIsCoolingDownNotCritical(t *testing.T) {
	e := sevEnv(t, gate)
	k := throttle.Key{Policy: gate.Name, Env: "test", Identifier: "80069563"}
	require.True(t, e.Take(k, 1).Allowed)
	e.Clock.Advance(3 * time.Second)
	st := e.State(k)
	require.Equal(t, throttle.SeverityHealthy, st.Severity)
	require.Equal(t, throttle.ConditionCoolingDown, st.Condition())
	require.Equal(t, 7*time.Second, st.CooldownLeft)
	require.Empty(t, transitions(e.Notes.Changes))
}

// What was seen: the cards counted the level stored at the last write while
// the rows showed the bucket refilled.
func TestCountNowCountsTheLevelNow(t *testing.T) {
	ctx := context.Background()
	e := sevEnv(t, fill)
	k := throttle.Key{Policy: fill.Name, Env: "prod", Identifier: "a"}
	require.True(t, e.Take(k, 95).Allowed)
	e.Clock.Advance(time.Minute) // full again

	stored, err := e.Limiter.CountBySeverity(ctx, throttle.Filter{})
	require.NoError(t, err)
	require.Equal(t, map[throttle.Severity]int64{throttle.SeverityCritical: 1}, stored)

	now, err := e.Limiter.CountNow(ctx, throttle.Filter{})
	require.NoError(t, err)
	require.Equal(t, int64(1), now.BySeverity[throttle.SeverityHealthy])
	require.Equal(t, int64(0), now.BySeverity[throttle.SeverityCritical])
	require.Equal(t, int64(1), now.Total)
	require.Equal(t, e.State(k).Severity, throttle.SeverityHealthy)
}

// What was seen: refill being lazy, no recovery event ever came.
func TestReevaluateDeliversTheRecoveryOnce(t *testing.T) {
	ctx := context.Background()
	e := sevEnv(t, fill)
	k := throttle.Key{Policy: fill.Name, Env: "prod", Identifier: "a"}
	require.True(t, e.Take(k, 95).Allowed)
	require.Equal(t, []string{"Healthy>Critical"}, transitions(e.Notes.Changes))

	n, err := e.Limiter.Reevaluate(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, n, "nothing refilled yet")

	e.Clock.Advance(time.Minute)
	n, err = e.Limiter.Reevaluate(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []string{"Healthy>Critical", "Critical>Healthy"}, transitions(e.Notes.Changes))

	n, err = e.Limiter.Reevaluate(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, n)
	require.Len(t, e.Notes.Changes, 2, "the recovery is delivered once")
}

func TestSeverityHysteresis(t *testing.T) {
	th := throttle.DefaultThresholds // 50/25/10, recover 5 points above
	p := fill
	for _, tc := range []struct {
		name   string
		tokens int64
		prev   throttle.Severity
		want   throttle.Severity
	}{
		{"WorseAtOnce", 9, throttle.SeverityHealthy, throttle.SeverityCritical},
		{"StaysCriticalJustAbove", 12, throttle.SeverityCritical, throttle.SeverityCritical},
		{"RecoversPastMargin", 15, throttle.SeverityCritical, throttle.SeverityHigh},
		{"NeverWorseThanFill", 5, throttle.SeverityHigh, throttle.SeverityCritical},
		{"FullIsHealthy", 100, throttle.SeverityCritical, throttle.SeverityHealthy},
		{"NoPrevNoHysteresis", 12, throttle.SeverityUnknown, throttle.SeverityHigh},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := throttle.Bucket{Tokens: tc.tokens}
			require.Equal(t, tc.want, th.Grade(p, b, throttletest.Epoch, tc.prev))
		})
	}
}

func TestListFiltersAndSortsBySeverityNow(t *testing.T) {
	ctx := context.Background()
	e := sevEnv(t, fill, gate)
	a := throttle.Key{Policy: fill.Name, Env: "prod", Identifier: "a"}
	b := throttle.Key{Policy: fill.Name, Env: "prod", Identifier: "b"}
	c := throttle.Key{Policy: gate.Name, Env: "test", Identifier: "c"}
	require.True(t, e.Take(a, 95).Allowed) // Critical
	require.True(t, e.Take(b, 60).Allowed) // Medium
	require.True(t, e.Take(c, 1).Allowed)  // cooling down, Healthy

	page, err := e.Limiter.List(ctx, throttle.Filter{Severity: throttle.SeverityCritical})
	require.NoError(t, err)
	require.Len(t, page.States, 1)
	require.Equal(t, a, page.States[0].Key)

	page, err = e.Limiter.List(ctx, throttle.Filter{Condition: throttle.ConditionCoolingDown})
	require.NoError(t, err)
	require.Len(t, page.States, 1)
	require.Equal(t, c, page.States[0].Key)

	all, partial, err := e.Limiter.ListAll(ctx, throttle.Filter{})
	require.NoError(t, err)
	require.False(t, partial)
	throttle.SortStates(all, throttle.SortSeverity)
	require.Equal(t, []throttle.Key{a, b, c}, []throttle.Key{all[0].Key, all[1].Key, all[2].Key})

	// Refilled: no longer Critical now, so the filter no longer finds it.
	e.Clock.Advance(time.Minute)
	page, err = e.Limiter.List(ctx, throttle.Filter{Severity: throttle.SeverityCritical})
	require.NoError(t, err)
	require.Empty(t, page.States)
}
