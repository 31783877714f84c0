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

// TestTakeOnALastChunkOfOneKey: a transaction on 33 stored buckets (one
// more than SQLite's rows per statement) loads its last key alone, and
// decides like any other.
func TestTakeOnALastChunkOfOneKey(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		s := sqlstoretest.MustOpen(t, engine, throttle.SystemClock)
		p := throttle.Policy{Name: "P", Capacity: 10, RefillTokens: 1, RefillPeriod: time.Hour}
		lim, err := throttle.NewLimiter(s, throttle.Policies{"P": p}, throttle.Config{})
		require.NoError(t, err)
		var charges []throttle.Charge
		for i := range 33 {
			charges = append(charges, throttle.Charge{Key: throttle.Key{Policy: "P", Env: "e", Identifier: fmt.Sprint(i)}, Cost: 1})
		}
		for want := int64(9); want >= 8; want-- {
			d, err := lim.Take(context.Background(), "", charges...)
			require.NoError(t, err)
			require.True(t, d.Allowed)
			require.Equal(t, want, d.Remaining)
		}
	})
}
