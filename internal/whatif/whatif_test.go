package whatif_test

import (
	"context"
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
