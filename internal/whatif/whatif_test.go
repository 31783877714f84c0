package whatif_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/whatif"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// A replay needs every take: a policy whose takes the ledger folds per
// minute or leaves out is refused with a message that says so, whether it
// says so itself or the engine's BALDE_LEDGER does, even when the period
// holds none of its rows.
func TestPoliciesWithoutEveryTakeAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy throttle.LedgerGranularity
		engine throttle.LedgerGranularity
		from   time.Duration // the period starts this long after the takes
		ok     bool
	}{
		{name: "every take", ok: true},
		{name: "policy per minute", policy: throttle.LedgerAggregateTakes},
		{name: "policy without takes", policy: throttle.LedgerNoTakes},
		{name: "engine per minute", engine: throttle.LedgerAggregateTakes},
		{name: "engine per minute, a period without rows", engine: throttle.LedgerAggregateTakes, from: time.Hour},
		{name: "policy every take, engine per minute", policy: throttle.LedgerEveryTake, engine: throttle.LedgerAggregateTakes, ok: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clock := throttle.NewManualClock(throttletest.Epoch)
			store := throttletest.NewMemStore(clock.Now)
			sms := throttle.Policy{Name: "SMS", Capacity: 3, RefillTokens: 1, RefillPeriod: time.Second, Ledger: tc.policy}
			lim, err := throttle.NewLimiter(store, throttle.Policies{"SMS": sms}, throttle.Config{Clock: clock.Now, Ledger: tc.engine})
			require.NoError(t, err)
			for range 5 { // 3 admitted, 2 refused
				_, err := lim.Take(ctx, "", throttle.Charge{Key: throttle.Key{Policy: "SMS", Env: "prod", Identifier: "acct-1"}, Cost: 1})
				require.NoError(t, err)
			}
			require.NoError(t, lim.FlushRefusals(ctx))
			from := throttletest.Epoch.Add(tc.from)
			rep, err := whatif.Run(ctx, whatif.Config{Source: store, Limiter: lim},
				whatif.Query{Policies: []string{"SMS"}, From: from, To: from.Add(time.Hour), Scenario: whatif.Scenario{Capacity: 5}})
			if tc.ok {
				require.NoError(t, err)
				require.Equal(t, int64(2), rep.Policies[0].Total.Better)
				return
			}
			require.ErrorIs(t, err, whatif.ErrInvalid)
			require.EqualError(t, err, "whatif: SMS: the ledger does not hold its takes one by one (BALDE_LEDGER or the policy's ledger is minute or none): a replay needs every take")
		})
	}
}

// A period a policy spent in shadow mode is replayed as the limit it
// shadowed: the shadow run's report equals the enforced run's, under its
// own settings and under a roomier one, and its would-be refusals are
// replayed as refusals.
func TestAShadowPeriodReplaysAsItsEnforcedRun(t *testing.T) {
	run := func(shadow bool, sc whatif.Scenario) (*whatif.Report, []whatif.Decision) {
		ctx := context.Background()
		clock := throttle.NewManualClock(throttletest.Epoch)
		store := throttletest.NewMemStore(clock.Now)
		sms := throttle.Policy{Name: "SMS", Capacity: 3, RefillTokens: 1, RefillPeriod: time.Second}
		lim, err := throttle.NewLimiter(store, throttle.Policies{"SMS": sms},
			throttle.Config{Clock: clock.Now, Shadow: func(string) bool { return shadow }})
		require.NoError(t, err)
		for i := range 12 { // bursts of 4 every 2 s: some refused, or would-be refused
			if i%4 == 0 && i > 0 {
				clock.Advance(2 * time.Second)
			}
			d, err := lim.Take(ctx, fmt.Sprint("req-", i), throttle.Charge{Key: throttle.Key{Policy: "SMS", Env: "prod", Identifier: "acct-1"}, Cost: 1})
			require.NoError(t, err)
			require.True(t, d.Allowed || !shadow, "request %d: shadow mode admits", i)
		}
		require.NoError(t, lim.FlushRefusals(ctx))
		var decisions []whatif.Decision
		rep, err := whatif.Run(ctx, whatif.Config{Source: store, Limiter: lim, OnDecision: func(d whatif.Decision) { decisions = append(decisions, d) }},
			whatif.Query{Policies: []string{"SMS"}, From: throttletest.Epoch, To: throttletest.Epoch.Add(time.Hour), Scenario: sc})
		require.NoError(t, err)
		return rep, decisions
	}
	for _, sc := range []whatif.Scenario{{}, {Capacity: 5}} {
		enforced, enforcedDecisions := run(false, sc)
		shadowed, shadowDecisions := run(true, sc)
		require.Positive(t, enforced.Policies[0].Total.RefusedThen, "the enforced run refused some")
		require.Equal(t, enforced.Policies, shadowed.Policies, "capacity %d", sc.Capacity)
		require.Len(t, shadowDecisions, len(enforcedDecisions))
		for i, d := range enforcedDecisions {
			// The enforced run answered some refusals from memory, in
			// groups without a reference; shadow mode asks the store.
			if d.Ref != "" {
				require.Equal(t, d.Ref, shadowDecisions[i].Ref)
			}
			require.Equal(t, d.Recorded, shadowDecisions[i].Recorded, "decision %d", i)
			require.Equal(t, d.Replayed.Allowed, shadowDecisions[i].Replayed.Allowed, "decision %d", i)
		}
	}
}
