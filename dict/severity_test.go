package dict_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// Issue 20 on seed 003's Pix-entity bucket (capacity 2000, a valid check
// costs 2, an invalid one 10, reserved at 10): at 1008 a valid check dipped
// the mirror to 998 while in flight and fired Healthy→Medium, a balance the
// remote side never saw. The hold is not graded; the settle grades what the
// outcome left, so only an invalid check, which really leaves 998, fires.
func TestPixEntityCheckSeverityFromTheSettledBalance(t *testing.T) {
	tests := []struct {
		outcome     string
		wantTokens  int64
		wantChanges []string
	}{
		{"valid", 1006, nil},
		{"invalid", 998, []string{"Healthy>Medium"}},
	}
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		for _, tt := range tests {
			t.Run(tt.outcome, func(t *testing.T) {
				ctx := context.Background()
				clock := throttle.NewManualClock(throttletest.Epoch)
				c := dict.NewCatalog("prod")
				require.NoError(t, c.LoadFile("testdata/policies/pix_entity.json"))
				notes := &throttletest.Recorder{}
				lim, err := throttle.NewLimiter(sqlstoretest.MustOpen(t, engine, clock.Now), c, throttle.Config{Clock: clock.Now, Notifier: notes})
				require.NoError(t, err)
				m := dict.Meter{Limiter: lim, Catalog: c}
				key := c.Key("PIX_ENTITY", "Bucket_KaoBank")
				d, err := lim.Take(ctx, "", throttle.Charge{Key: key, Cost: 992})
				require.NoError(t, err)
				require.True(t, d.Allowed)

				r, err := m.Reserve(ctx, "pixKeyValidation", "check-1", key)
				require.NoError(t, err)
				require.True(t, r.Decision.Allowed)
				require.Empty(t, notes.Changes, "the hold in flight (1008 → 998) changes no severity")
				_, err = m.Settle(ctx, r, tt.outcome)
				require.NoError(t, err)

				st, err := lim.State(ctx, key)
				require.NoError(t, err)
				require.Equal(t, tt.wantTokens, st.Tokens)
				var got []string
				for _, ch := range notes.Changes {
					got = append(got, ch.From.String()+">"+ch.To.String())
				}
				require.Equal(t, tt.wantChanges, got)
			})
		}
	})
}
