package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// TestWindowSeesRowsBehindALateRefusalRow: refusals answered from memory
// reach the ledger when their group is flushed — here with the bucket's
// take two hours later — stamped with the last refusal's time, so the
// bucket's newest row looks older than the take before it. The chart's
// walk stopped at that row and showed an empty window (review); it walks
// through refusal rows now. The in-memory store is the reference.
func TestWindowSeesRowsBehindALateRefusalRow(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := context.Background()
		clock := throttle.NewManualClock(throttletest.Epoch)
		s := sqlstoretest.MustOpen(t, engine, clock.Now)
		mem := throttletest.NewMemStore(clock.Now)
		pol := throttle.Policies{"SLOW": {Name: "SLOW", Capacity: 1, RefillTokens: 1, RefillPeriod: time.Hour, Refill: throttle.RefillStepwise}}
		k := throttle.Key{Policy: "SLOW", Env: "prod", Identifier: "x"}
		for name, st := range map[string]throttletest.FullStore{"sql": s, "mem": mem} {
			clock.Set(throttletest.Epoch)
			lim, err := throttle.NewLimiter(st, pol, throttle.Config{Clock: clock.Now})
			require.NoError(t, err)
			t0 := throttletest.Epoch
			d, err := lim.Take(ctx, "", throttle.Charge{Key: k, Cost: 1})
			require.NoError(t, err)
			require.True(t, d.Allowed)
			clock.Set(t0.Add(time.Second))
			d, _ = lim.Take(ctx, "", throttle.Charge{Key: k, Cost: 1}) // refused by the store
			require.False(t, d.Allowed)
			clock.Set(t0.Add(2 * time.Second))
			d, _ = lim.Take(ctx, "", throttle.Charge{Key: k, Cost: 1}) // refused from memory
			require.False(t, d.Allowed)
			clock.Set(t0.Add(2 * time.Hour))
			d, err = lim.Take(ctx, "", throttle.Charge{Key: k, Cost: 1}) // admitted; the memory group rides along
			require.NoError(t, err)
			require.True(t, d.Allowed)
			clock.Set(t0.Add(2*time.Hour + time.Minute))
			w, err := inspect.New(lim, st).LedgerWindow(ctx, inspect.LedgerWindowQuery{Key: k, From: t0.Add(time.Hour + 50*time.Minute), To: clock.Now(), Slots: 10})
			require.NoError(t, err)
			es, _ := inspect.New(lim, st).Ledger(ctx, inspect.LedgerQuery{Key: &k, Limit: 10})
			for _, e := range es {
				t.Logf("%s ledger: id=%d at=%s reason=%s n=%d", name, e.ID, e.At.Sub(t0), e.Reason, e.Count)
			}
			t.Logf("%s window: %+v", name, w.Slots)
			require.NotEmpty(t, w.Slots, "%s: the take at t0+2h is in the window", name)
		}
	})
}
