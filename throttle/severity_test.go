package throttle_test

import (
	"context"
	"fmt"
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
	e := throttletest.NewMemEnv(t, gate)
	k := throttle.Key{Policy: gate.Name, Env: "test", Identifier: "80069563"}
	require.True(t, e.Take(k, 1).Allowed)
	e.Clock.Advance(3 * time.Second)
	st := e.State(k)
	require.Equal(t, throttle.SeverityHealthy, st.Severity)
	require.Equal(t, throttle.ConditionCoolingDown, st.Condition())
	require.Equal(t, 7*time.Second, st.CooldownLeft)
	require.Empty(t, transitions(e.Notes.Changes))
}

// What was seen: refill being lazy, no recovery event ever came.
func TestReevaluateDeliversTheRecoveryOnce(t *testing.T) {
	ctx := context.Background()
	e := throttletest.NewMemEnv(t, fill)
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
			require.Equal(t, tc.want, throttle.Grade(th, p, b, throttletest.Epoch, tc.prev))
		})
	}
}

// What was seen (issue 14, point 1, after the first fix): a row stored
// Healthy under one capacity (45 of category H's 50) is Critical under the
// capacity in effect now (45 of 50,000), yet the cards and the Critical
// filter trusted the stored Healthy and left it out, and Reevaluate never
// re-graded or alerted it.
func TestCapacityChangeRegradesRowsStoredHealthy(t *testing.T) {
	ctx := context.Background()
	k := throttle.Key{Policy: "ENTRIES_READ_PARTICIPANT_ANTISCAN", Env: "prod", Identifier: "12345678"}
	for _, tc := range []struct {
		name string
		// regradeBefore: the limiter had graded every row under capacity
		// 50 (serve running) before the capacity changed; otherwise it is
		// a fresh process reading rows an earlier one wrote.
		regradeBefore bool
	}{
		{name: "capacity changes while serving", regradeBefore: true},
		{name: "a new process with another capacity", regradeBefore: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			capacity := int64(50)
			res := throttle.ResolverFunc(func(key throttle.Key) (throttle.Policy, error) {
				return throttle.Policy{Name: key.Policy, Capacity: capacity, RefillTokens: 1, RefillPeriod: time.Hour}, nil
			})
			e := throttletest.NewEnv(t, func(_ *testing.T, now throttle.Clock) throttletest.FullStore {
				return throttletest.NewMemStore(now)
			}, res, throttle.Config{Definitions: func() string { return fmt.Sprint(capacity) }})
			require.True(t, e.Take(k, 5).Allowed) // 45 of 50: Healthy
			if tc.regradeBefore {
				_, err := e.Limiter.Reevaluate(ctx) // not Trusted yet: a full regrade
				require.NoError(t, err)
				require.True(t, e.Limiter.Trusted())
			}
			capacity = 50_000 // the category learned at start
			require.False(t, e.Limiter.Trusted(), "the definitions changed")
			require.Equal(t, throttle.SeverityCritical, e.State(k).Severity)

			count := func() map[throttle.Severity]int64 {
				t.Helper()
				c, err := e.Reader.CountNow(ctx, inspect.Filter{})
				require.NoError(t, err)
				return c.BySeverity
			}
			critical := func() []throttle.Key {
				t.Helper()
				page, err := e.Reader.List(ctx, inspect.Filter{Severity: throttle.SeverityCritical})
				require.NoError(t, err)
				var out []throttle.Key
				for _, s := range page.States {
					out = append(out, s.Key)
				}
				return out
			}
			require.Equal(t, int64(1), count()[throttle.SeverityCritical], "the card counts the level now")
			require.Equal(t, int64(0), count()[throttle.SeverityHealthy])
			require.Equal(t, []throttle.Key{k}, critical(), "the Critical filter finds it")

			n, err := e.Limiter.Reevaluate(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.Equal(t, []string{"Healthy>Critical"}, transitions(e.Notes.Changes), "alerted once")
			require.True(t, e.Limiter.Trusted())
			stored, err := e.Reader.CountBySeverity(ctx, inspect.Filter{})
			require.NoError(t, err)
			require.Equal(t, map[throttle.Severity]int64{throttle.SeverityCritical: 1}, stored, "the level now is written")
			require.Equal(t, int64(1), count()[throttle.SeverityCritical])
			require.Equal(t, []throttle.Key{k}, critical())

			n, err = e.Limiter.Reevaluate(ctx)
			require.NoError(t, err)
			require.Zero(t, n)
			require.Len(t, e.Notes.Changes, 1)
		})
	}
}

// What was seen (issue 20, seed 003's Pix-entity check: a valid check costs
// 2, an invalid one 10, reserved at 10 and refunded): at 1008 of 2000 a
// valid check dipped to 998 and fired Healthy→Medium, a balance the remote
// side never saw; hysteresis then kept it Medium until 1100. A hold in
// flight is not graded; the balance left at the settle is.
func TestSeverityLeavesHoldsInFlightOut(t *testing.T) {
	entity := throttle.Policy{Name: "PIX_ENTITY_CHECK", Capacity: 2000, RefillTokens: 2, RefillPeriod: time.Hour}
	tests := []struct {
		name        string
		refund      int64 // what the settle gives back: 8 valid, 0 invalid
		wantPending bool
		wantStored  throttle.Severity
		wantChanges []string
	}{
		{name: "ValidCheckStaysHealthy", refund: 8, wantPending: true, wantStored: throttle.SeverityHealthy},
		{name: "InvalidCheckGradedAtTheSettle", refund: 0, wantPending: true, wantStored: throttle.SeverityMedium, wantChanges: []string{"Healthy>Medium"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			e := throttletest.NewMemEnv(t, entity)
			k := throttle.Key{Policy: entity.Name, Env: "prod", Identifier: "12345678"}
			require.True(t, e.Take(k, 992).Allowed) // 1008 left: Healthy
			require.Empty(t, transitions(e.Notes.Changes))

			d, err := e.Limiter.Take(ctx, "check-1", throttle.Charge{Key: k, Cost: 10, Admit: 1})
			require.NoError(t, err)
			require.True(t, d.Allowed)
			require.Equal(t, int64(998), d.Remaining, "the worst case is held")
			require.Equal(t, tt.wantPending, d.Buckets[0].GradePending)
			require.Empty(t, transitions(e.Notes.Changes), "a hold in flight changes no severity")

			_, err = e.Limiter.Adjust(ctx, throttle.Adjustment{Key: k, Delta: tt.refund, Reason: throttle.LedgerRefund, Ref: "check-1"})
			require.NoError(t, err)
			require.Equal(t, tt.wantChanges, transitions(e.Notes.Changes))
			st := e.State(k)
			require.Equal(t, tt.wantStored, st.Bucket.Severity)
			require.Equal(t, tt.wantStored, st.Severity)
		})
	}
}
