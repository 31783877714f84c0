package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/alldrivers"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// TestNonDurableDecidesAndLeavesTheConnectionDurable: decisions through
// NonDurable are stored like any other, and its SET LOCAL ends with its
// transaction: the pool's connection (one here, so the same) commits the
// next transaction durably again.
func TestNonDurableDecidesAndLeavesTheConnectionDurable(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		clock := throttle.NewManualClock(throttletest.Epoch)
		s, err := alldrivers.Open(context.Background(), sqlstoretest.DSN(t, engine), sqlstore.Options{Clock: clock.Now, MaxConns: 1})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		p := throttle.Policy{Name: "INBOUND_IP", Refill: throttle.RefillRolling, Capacity: 2, RefillTokens: 2,
			RefillPeriod: time.Minute, RollingGrain: time.Second, Ledger: throttle.LedgerNoTakes}
		lim, err := throttle.NewLimiter(s.NonDurable(), throttle.Policies{p.Name: p}, throttle.Config{Clock: clock.Now, SkipRefusalRows: true})
		require.NoError(t, err)
		key := throttle.Key{Policy: p.Name, Env: "prod", Identifier: "192.0.2.1"}
		var admitted []bool
		for range 3 {
			d, err := lim.Take(context.Background(), "", throttle.Charge{Key: key, Cost: 1})
			require.NoError(t, err)
			admitted = append(admitted, d.Allowed)
		}
		require.Equal(t, []bool{true, true, false}, admitted)
		bs, err := s.Buckets(context.Background(), []throttle.Key{key})
		require.NoError(t, err)
		require.Len(t, bs, 1)
		require.Equal(t, int64(0), bs[0].Tokens)
		if engine == sqlstore.Postgres {
			var setting string
			require.NoError(t, s.DB().QueryRow(`SHOW synchronous_commit`).Scan(&setting))
			require.Equal(t, "on", setting)
		}
	})
}
