package inspect_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// TestLedgerListsALateRefusalRowAtItsTime: refusals answered from memory
// reach the ledger with the bucket's next take, two hours later, stamped
// with the last refusal's time (decision 0007), so the row written last is
// not the newest. The bucket page and `buckets show` listed it first, above
// the take it is older than; the ledger is listed by time now, on every
// store, and its pages still hold every row once.
func TestLedgerListsALateRefusalRowAtItsTime(t *testing.T) {
	stores := map[string]func(t *testing.T, now throttle.Clock) throttletest.FullStore{
		"mem": func(_ *testing.T, now throttle.Clock) throttletest.FullStore { return throttletest.NewMemStore(now) },
	}
	for _, e := range sqlstoretest.Engines {
		stores[string(e)] = func(t *testing.T, now throttle.Clock) throttletest.FullStore {
			return sqlstoretest.MustOpen(t, e, now)
		}
	}
	type row struct {
		At     time.Duration // after t0
		Reason throttle.LedgerReason
	}
	want := []row{
		{2 * time.Hour, throttle.LedgerTake},
		{2 * time.Second, throttle.LedgerRefusedEmpty}, // answered from memory, written at 2 h
		{time.Second, throttle.LedgerRefusedEmpty},     // refused by the store
		{0, throttle.LedgerTake},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			t0 := throttletest.Epoch
			clock := throttle.NewManualClock(t0)
			st := open(t, clock.Now)
			pol := throttle.Policies{"SLOW": {Name: "SLOW", Capacity: 1, RefillTokens: 1, RefillPeriod: time.Hour, Refill: throttle.RefillStepwise}}
			lim, err := throttle.NewLimiter(st, pol, throttle.Config{Clock: clock.Now})
			require.NoError(t, err)
			k := throttle.Key{Policy: "SLOW", Env: "prod", Identifier: "x"}
			for _, step := range []struct {
				at      time.Duration
				allowed bool
			}{{0, true}, {time.Second, false}, {2 * time.Second, false}, {2 * time.Hour, true}} {
				clock.Set(t0.Add(step.at))
				d, err := lim.Take(ctx, "", throttle.Charge{Key: k, Cost: 1})
				require.NoError(t, err)
				require.Equal(t, step.allowed, d.Allowed, "take at %s", step.at)
			}
			r := inspect.New(lim, st)
			rows := func(es []throttle.LedgerEntry) []row {
				var out []row
				for _, e := range es {
					out = append(out, row{e.At.Sub(t0), e.Reason})
				}
				return out
			}

			es, err := r.Ledger(ctx, inspect.LedgerQuery{Key: &k, Limit: 20})
			require.NoError(t, err)
			require.Equal(t, want, rows(es), "the recent ledger, newest first")

			// Pages of two: every row once, each page by time.
			var paged []throttle.LedgerEntry
			q := inspect.LedgerQuery{Key: &k, Limit: 2}
			for range len(want) {
				page, err := r.Ledger(ctx, q)
				require.NoError(t, err)
				for i := 1; i < len(page); i++ {
					require.False(t, page[i].At.After(page[i-1].At), "page before %d by time", q.BeforeID)
				}
				paged = append(paged, page...)
				if len(page) < q.Limit {
					break
				}
				q.BeforeID = inspect.NextLedgerCursor(page)
			}
			require.ElementsMatch(t, rows(es), rows(paged))
			require.Len(t, paged, len(want))
		})
	}
}

func TestNextLedgerCursor(t *testing.T) {
	tests := []struct {
		name string
		ids  []int64
		want int64
	}{
		{"Empty", nil, 0},
		{"InWrittenOrder", []int64{9, 8, 7}, 7},
		{"LateRowListedLast", []int64{8, 7, 9}, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var page []throttle.LedgerEntry
			for _, id := range tt.ids {
				page = append(page, throttle.LedgerEntry{ID: id})
			}
			require.Equal(t, tt.want, inspect.NextLedgerCursor(page))
		})
	}
}
