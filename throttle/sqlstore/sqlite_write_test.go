package sqlstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// TestWriteKeepsColdColumns: a transaction that sets a hold on one bucket
// and only takes on others writes each bucket's own state, and later plain
// takes on the held bucket keep its hold (the columns of blocks, holds,
// cooldowns and windows ride along every write). One key goes through the
// one-row statements, several through the multi-row ones (SQLite's load
// of several keys maps each row back to its key by its number in the
// list).
func TestWriteKeepsColdColumns(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		for _, n := range []int{1, 3} {
			t.Run(fmt.Sprintf("keys=%d", n), func(t *testing.T) {
				ctx := context.Background()
				clock := throttle.NewManualClock(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
				s := sqlstoretest.MustOpen(t, engine, clock.Now)
				p := throttle.Policy{Name: "P", Capacity: 10, RefillTokens: 1, RefillPeriod: time.Minute}
				lim, err := throttle.NewLimiter(s, throttle.Policies{"P": p}, throttle.Config{Clock: clock.Now})
				require.NoError(t, err)
				keys := make([]throttle.Key, n)
				for i := range keys {
					keys[i] = throttle.Key{Policy: "P", Env: "prod", Identifier: fmt.Sprintf("k%d", i)}
				}
				take := func(holdFirst time.Duration) {
					t.Helper()
					charges := make([]throttle.Charge, n)
					for i, k := range keys {
						charges[i] = throttle.Charge{Key: k, Cost: 1}
					}
					charges[0].HoldFor = holdFirst
					d, err := lim.Take(ctx, "", charges...)
					require.NoError(t, err)
					require.True(t, d.Allowed, "%+v", d)
				}
				take(0) // creates the rows
				take(0) // plain takes on rows that exist
				take(time.Hour)
				heldUntil := clock.Now().Add(time.Hour)
				clock.Advance(time.Second)
				// The hold refuses the held key: take the others alone.
				if n > 1 {
					keys = keys[1:]
					n--
					take(0)
					keys, n = append([]throttle.Key{{Policy: "P", Env: "prod", Identifier: "k0"}}, keys...), n+1
				}
				bs, err := s.Buckets(ctx, keys)
				require.NoError(t, err)
				require.Len(t, bs, n)
				for i, b := range bs {
					takes := int64(3)
					if i > 0 {
						takes = 4
					}
					require.Equal(t, p.Capacity-takes, b.Tokens, "tokens of %s", b.Key)
					require.Equal(t, takes, b.SendCount, "sends of %s", b.Key)
					if i == 0 {
						require.True(t, b.HeldUntil.Equal(heldUntil), "hold of %s: %v, want %v", b.Key, b.HeldUntil, heldUntil)
					} else {
						require.True(t, b.HeldUntil.IsZero(), "hold of %s: %v", b.Key, b.HeldUntil)
					}
				}
				d, err := lim.Take(ctx, "", throttle.Charge{Key: keys[0], Cost: 1})
				require.NoError(t, err)
				require.False(t, d.Allowed, "the held key admitted a take: %+v", d)
			})
		}
	})
}
