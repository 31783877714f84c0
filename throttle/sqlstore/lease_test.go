package sqlstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// leaseSpan is the Config.Lease of these tests.
const leaseSpan = time.Second

// leaseLimiters opens n stores on one database of engine ("n processes"),
// each through group commit on its NonDurable view as the inbound limiter
// runs, with a Limiter with quota leases; it returns the limiters and the
// group commits (whose operations are the decisions that reached a store).
func leaseLimiters(t *testing.T, engine sqlstore.Engine, n int, p throttle.Policy, clock *throttle.ManualClock) ([]*throttle.Limiter, []*throttle.GroupCommit) {
	t.Helper()
	dsn := sqlstoretest.DSN(t, engine)
	var lims []*throttle.Limiter
	var groups []*throttle.GroupCommit
	for range n {
		s := sqlstoretest.MustOpenDSN(t, dsn, clock.Now)
		g := throttle.NewGroupCommit(s.NonDurable(), throttle.GroupCommitOptions{Writers: 2})
		t.Cleanup(func() { require.NoError(t, g.Close()) })
		lim, err := throttle.NewLimiter(g, throttle.Policies{p.Name: p}, throttle.Config{Clock: clock.Now, SkipRefusalRows: true, Lease: leaseSpan})
		require.NoError(t, err)
		lims, groups = append(lims, lim), append(groups, g)
	}
	return lims, groups
}

// TestLeasesNeverAdmitMoreThanTheLimit: two and three stores on one
// database, each with quota leases, hammer a few hot keys at once while a
// fake clock moves on by random steps over several windows: no window of
// any key ever holds more admissions than the capacity, and most decisions
// never reached a store. With a capacity the keys exceed (60 a minute)
// they are refused from memory once refused; with one they stay below
// (5000, a lease never takes a bucket below half of it), admitted from
// leases.
func TestLeasesNeverAdmitMoreThanTheLimit(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		for _, tc := range []struct{ n, capacity int }{{2, 60}, {3, 60}, {2, 5000}, {3, 5000}} {
			n, capacity := tc.n, tc.capacity
			t.Run(fmt.Sprintf("stores=%d/capacity=%d", n, capacity), func(t *testing.T) {
				const (
					keys    = 3
					workers = 4 // per store
					takes   = 6 // per worker and round
					rounds  = 90
				)
				p := inboundPolicy(int64(capacity))
				clock := throttle.NewManualClock(throttletest.Epoch)
				lims, groups := leaseLimiters(t, engine, n, p, clock)
				rng := rand.New(rand.NewPCG(1, uint64(n)))
				admitted := make([][]time.Time, keys)
				var mu sync.Mutex
				total := 0
				for range rounds {
					clock.Advance(time.Duration(rng.IntN(2500)) * time.Millisecond)
					now := clock.Now()
					var wg sync.WaitGroup
					errs := make(chan error, n*workers)
					for _, lim := range lims {
						for w := range workers {
							wg.Go(func() {
								for i := range takes {
									k := (w + i) % keys
									d, err := lim.Take(context.Background(), "", throttle.Charge{Key: inboundKey(k), Cost: 1})
									if err != nil {
										errs <- err
										return
									}
									if d.Allowed {
										mu.Lock()
										admitted[k] = append(admitted[k], now)
										mu.Unlock()
									}
								}
							})
						}
					}
					wg.Wait()
					close(errs)
					for err := range errs {
						require.NoError(t, err)
					}
					total += n * workers * takes
				}
				sum := 0
				for k, at := range admitted {
					slices.SortFunc(at, time.Time.Compare)
					sum += len(at)
					for i := range at {
						j, _ := slices.BinarySearchFunc(at, at[i].Add(p.RefillPeriod), time.Time.Compare)
						require.LessOrEqual(t, j-i, capacity, "key %d: admissions in the window from %s", k, at[i])
					}
				}
				var reached int64
				for _, g := range groups {
					_, ops := g.Stats()
					reached += ops
				}
				t.Logf("%s, %d stores, capacity %d: %d takes, %d admitted, %d reached a store", engine, n, capacity, total, sum, reached)
				require.Less(t, reached, int64(total)/2, "most decisions are admitted from leases or refused from memory")
				if capacity == 5000 {
					require.Equal(t, total, sum, "below the limit every take is admitted")
				}
			})
		}
	})
}

// TestALeaseEndsBeforeABlockIsMissed: a store holding a lease on a key
// admits from it while another store exhausts the key and blocks it; once
// its lease has ended (at most the lease's span plus a grain later) it
// refuses the key as blocked, as the other does.
func TestALeaseEndsBeforeABlockIsMissed(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := context.Background()
		p := inboundPolicy(100)
		p.BlockFor = time.Minute
		clock := throttle.NewManualClock(throttletest.Epoch)
		lims, groups := leaseLimiters(t, engine, 2, p, clock)
		a, b := lims[0], lims[1]
		key := inboundKey(0)
		take := func(l *throttle.Limiter) throttle.Decision {
			d, err := l.Take(ctx, "", throttle.Charge{Key: key, Cost: 1})
			require.NoError(t, err)
			return d
		}
		// The first take finds the key cold; the second, a key seen twice,
		// leases a slice; the next are admitted from it.
		for range 2 {
			require.True(t, take(a).Allowed)
		}
		_, before := groups[0].Stats()
		require.True(t, take(a).Allowed, "admitted from a's lease")
		_, after := groups[0].Stats()
		require.Equal(t, before, after, "a's third take is decided from its lease")
		for range 5 {
			take(a) // a's lease grows with the key's demand
		}
		_, before = groups[0].Stats()
		require.True(t, take(a).Allowed)
		_, after = groups[0].Stats()
		require.Equal(t, before, after, "a holds a lease with tokens left")

		refused := false
		for range 200 {
			if !take(b).Allowed {
				refused = true
				break
			}
		}
		require.True(t, refused, "b exhausts the key")
		require.Equal(t, throttle.ReasonBlocked, take(b).Reason)

		clock.Advance(leaseSpan + p.RollingGrain)
		d := take(a)
		require.False(t, d.Allowed, "a's lease has ended: the block applies")
		require.Equal(t, throttle.ReasonBlocked, d.Reason)
	})
}
