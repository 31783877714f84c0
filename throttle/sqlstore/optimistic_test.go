package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// The optimistic write of NonDurable on PostgreSQL (decision 0116): these
// tests open several stores on one database, each standing for a process
// with its own memory of the rows it wrote.

// inboundPolicy is an inbound limiter's policy: capacity takes per minute,
// rolling, no ledger rows for takes.
func inboundPolicy(capacity int64) throttle.Policy {
	return throttle.Policy{Name: "INBOUND_IP", Refill: throttle.RefillRolling, Capacity: capacity, RefillTokens: capacity,
		RefillPeriod: time.Minute, RollingGrain: time.Second, Ledger: throttle.LedgerNoTakes}
}

func inboundKey(i int) throttle.Key {
	return throttle.Key{Policy: "INBOUND_IP", Env: "prod", Identifier: fmt.Sprintf("192.0.2.%d", i)}
}

// newInboundLimiter is a limiter on store as balde's inbound limiter has it
// (refusals kept in memory, not in the ledger).
func newInboundLimiter(t *testing.T, store throttle.Store, p throttle.Policy, clock *throttle.ManualClock) *throttle.Limiter {
	t.Helper()
	lim, err := throttle.NewLimiter(store, throttle.Policies{p.Name: p}, throttle.Config{Clock: clock.Now, SkipRefusalRows: true})
	require.NoError(t, err)
	return lim
}

func tokens(t *testing.T, s *sqlstore.Store, keys ...throttle.Key) []int64 {
	t.Helper()
	bs, err := s.Buckets(context.Background(), keys)
	require.NoError(t, err)
	out := make([]int64, len(bs))
	for i, b := range bs {
		out[i] = b.Tokens
	}
	return out
}

// TestOptimisticTwoProcessesExact: two stores on one database ("two
// processes"), each with its own group commit, hammer the same keys at
// once, for two windows of a fake clock. Per key and window they admit
// exactly what one store admits on the locking path for as many attempts:
// the capacity, never more, although most of their batches are written in
// one round trip on the rows each remembers, which the other keeps
// changing.
//
// The same holds with three stores, and with quota leases on (decision
// 0221): a store then admits from its lease the requests that follow its
// first ones on a key, and still per key and window exactly the capacity
// is admitted.
func TestOptimisticTwoProcessesExact(t *testing.T) {
	for _, tc := range []struct {
		stores int
		lease  time.Duration
	}{{2, 0}, {3, 0}, {2, leaseSpan}, {3, leaseSpan}} {
		t.Run(fmt.Sprintf("stores=%d/lease=%s", tc.stores, tc.lease), func(t *testing.T) {
			testOptimisticProcessesExact(t, tc.stores, tc.lease)
		})
	}
}

func testOptimisticProcessesExact(t *testing.T, n int, lease time.Duration) {
	const (
		capacity = 40
		keys     = 5
		workers  = 8 // per store
		rounds   = 30
	)
	p := inboundPolicy(capacity)
	clock := throttle.NewManualClock(throttletest.Epoch)
	dsn := sqlstoretest.DSN(t, sqlstore.Postgres)
	var stores []*sqlstore.Store
	var lims []*throttle.Limiter
	for range n {
		s := sqlstoretest.MustOpenDSN(t, dsn, clock.Now)
		g := throttle.NewGroupCommit(s.NonDurable(), throttle.GroupCommitOptions{Writers: 2})
		t.Cleanup(func() { require.NoError(t, g.Close()) })
		lim, err := throttle.NewLimiter(g, throttle.Policies{p.Name: p}, throttle.Config{Clock: clock.Now, SkipRefusalRows: true, Lease: lease})
		require.NoError(t, err)
		stores, lims = append(stores, s), append(lims, lim)
	}
	// The reference: the same attempts, one at a time, on the locking
	// path of a store of its own (durable: never optimistic).
	locked := sqlstoretest.MustOpen(t, sqlstore.Postgres, clock.Now)
	ref := newInboundLimiter(t, locked, p, clock)

	attempts := len(stores) * workers * rounds / keys
	for window := range 2 {
		want := make([]int, keys)
		for i := range attempts * keys {
			d, err := ref.Take(context.Background(), "", throttle.Charge{Key: inboundKey(i % keys), Cost: 1})
			require.NoError(t, err)
			if d.Allowed {
				want[i%keys]++
			}
		}
		require.Equal(t, capacity, want[0], "the reference admits the capacity")

		var mu sync.Mutex
		got := make([]int, keys)
		var wg sync.WaitGroup
		errs := make(chan error, len(lims)*workers)
		for _, lim := range lims {
			for w := range workers {
				wg.Go(func() {
					for r := range rounds {
						k := (w + r) % keys
						d, err := lim.Take(context.Background(), "", throttle.Charge{Key: inboundKey(k), Cost: 1})
						if err != nil {
							errs <- err
							return
						}
						if d.Allowed {
							mu.Lock()
							got[k]++
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
		require.Equal(t, want, got, "window %d: admitted per key", window)
		clock.Advance(time.Minute + time.Second)
	}
	var oneTrip, conflicts int64
	for i, s := range stores {
		st := s.OptimisticStats()
		t.Logf("store %d: %+v", i, st)
		oneTrip += st.OneTrip
		conflicts += st.Conflicts
	}
	// Every conflict is a one-round-trip write tried on remembered rows;
	// how many of them the others' writes beat depends on the machine's
	// load (at load 10 all of them did once), not on exactness.
	require.Positive(t, oneTrip+conflicts, "batches tried in one round trip")
	require.Zero(t, locked.OptimisticStats(), "a durable store is never optimistic")
}

// TestOptimisticSeesChangesBehindItsMemory: a row changed by someone else
// after this store last wrote it is never overwritten with the state it
// remembers: its next decision sees the change, whether another process
// spent tokens, an administrator reset the bucket or deleted its row.
func TestOptimisticSeesChangesBehindItsMemory(t *testing.T) {
	key := inboundKey(1)
	for _, tc := range []struct {
		name   string
		behind func(t *testing.T, other *sqlstore.Store, otherLim *throttle.Limiter)
		want   []bool // the next takes of the store that remembers
	}{
		{
			name: "another process spends",
			behind: func(t *testing.T, _ *sqlstore.Store, otherLim *throttle.Limiter) {
				d, err := otherLim.Take(context.Background(), "", throttle.Charge{Key: key, Cost: 1})
				require.NoError(t, err)
				require.True(t, d.Allowed)
			},
			want: []bool{false, false},
		},
		{
			name: "an administrator resets it",
			behind: func(t *testing.T, other *sqlstore.Store, _ *throttle.Limiter) {
				lim, err := throttle.NewLimiter(other, throttle.Policies{key.Policy: inboundPolicy(3)}, throttle.Config{})
				require.NoError(t, err)
				_, err = lim.Reset(context.Background(), key, "admin")
				require.NoError(t, err)
			},
			want: []bool{true, true, true, false},
		},
		{
			name: "its row is deleted (pruned)",
			behind: func(t *testing.T, other *sqlstore.Store, _ *throttle.Limiter) {
				res, err := other.DB().Exec(`DELETE FROM balde_buckets WHERE identifier = $1`, key.Identifier)
				require.NoError(t, err)
				n, err := res.RowsAffected()
				require.NoError(t, err)
				require.Equal(t, int64(1), n)
			},
			want: []bool{true, true, true, false},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := throttle.NewManualClock(throttletest.Epoch)
			dsn := sqlstoretest.DSN(t, sqlstore.Postgres)
			mine, other := sqlstoretest.MustOpenDSN(t, dsn, clock.Now), sqlstoretest.MustOpenDSN(t, dsn, clock.Now)
			lim := newInboundLimiter(t, mine.NonDurable(), inboundPolicy(3), clock)
			otherLim := newInboundLimiter(t, other.NonDurable(), inboundPolicy(3), clock)
			for range 2 {
				d, err := lim.Take(context.Background(), "", throttle.Charge{Key: key, Cost: 1})
				require.NoError(t, err)
				require.True(t, d.Allowed)
			}
			require.Equal(t, sqlstore.OptimisticStats{OneTrip: 1, Locked: 1}, mine.OptimisticStats(), "a new key read under lock, then one round trip")

			tc.behind(t, other, otherLim)

			var got []bool
			for range tc.want {
				d, err := lim.Take(context.Background(), "", throttle.Charge{Key: key, Cost: 1})
				require.NoError(t, err)
				got = append(got, d.Allowed)
			}
			require.Equal(t, tc.want, got)
			st := mine.OptimisticStats()
			require.Equal(t, int64(1), st.Conflicts, "%+v: the change is found once", st)
			require.GreaterOrEqual(t, st.Locked, int64(2), "%+v: then the row is read under lock", st)
		})
	}
}

// TestOptimisticStaleKeyCommitsNothing: in a batch of two remembered keys
// of which another process changed one, the one-round-trip write commits
// nothing, not even the other key's take; the batch then commits once on
// the locking path.
func TestOptimisticStaleKeyCommitsNothing(t *testing.T) {
	clock := throttle.NewManualClock(throttletest.Epoch)
	dsn := sqlstoretest.DSN(t, sqlstore.Postgres)
	mine, other := sqlstoretest.MustOpenDSN(t, dsn, clock.Now), sqlstoretest.MustOpenDSN(t, dsn, clock.Now)
	p := inboundPolicy(10)
	lim := newInboundLimiter(t, mine.NonDurable(), p, clock)
	otherLim := newInboundLimiter(t, other.NonDurable(), p, clock)
	k1, k2 := inboundKey(1), inboundKey(2)
	both := []throttle.Charge{{Key: k1, Cost: 1}, {Key: k2, Cost: 1}}

	for range 2 {
		d, err := lim.Take(context.Background(), "", both...)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	d, err := otherLim.Take(context.Background(), "", throttle.Charge{Key: k2, Cost: 1})
	require.NoError(t, err)
	require.True(t, d.Allowed)

	d, err = lim.Take(context.Background(), "", both...)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.Equal(t, []int64{10 - 3, 10 - 4}, tokens(t, mine, k1, k2), "k1 taken 3 times, not 4; k2 4 times")
	require.Equal(t, sqlstore.OptimisticStats{OneTrip: 1, Conflicts: 1, Locked: 2}, mine.OptimisticStats())

	// Both keys are contended: they take the locking path until two
	// batches in a row find them as this store left them; then one round
	// trip again.
	for range 3 {
		_, err = lim.Take(context.Background(), "", both...)
		require.NoError(t, err)
	}
	require.Equal(t, sqlstore.OptimisticStats{OneTrip: 2, Conflicts: 1, Locked: 4}, mine.OptimisticStats())
}

// TestOptimisticCommonCaseIsOneRoundTrip: a store alone on its keys writes
// every batch in one round trip, new keys' first included (an insert),
// once its first batch (on the locking path: a store that just opened)
// found no row; a second store opening on the rows the first wrote reads
// them under lock, without a failed insert, and from then on writes in one
// round trip too.
func TestOptimisticCommonCaseIsOneRoundTrip(t *testing.T) {
	clock := throttle.NewManualClock(throttletest.Epoch)
	dsn := sqlstoretest.DSN(t, sqlstore.Postgres)
	first, second := sqlstoretest.MustOpenDSN(t, dsn, clock.Now), sqlstoretest.MustOpenDSN(t, dsn, clock.Now)
	p := inboundPolicy(100)
	lim := newInboundLimiter(t, first.NonDurable(), p, clock)
	for i := range 20 {
		clock.Advance(time.Second)
		d, err := lim.Take(context.Background(), "", throttle.Charge{Key: inboundKey(i % 4), Cost: 1})
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	require.Equal(t, sqlstore.OptimisticStats{OneTrip: 19, Locked: 1}, first.OptimisticStats())

	lim2 := newInboundLimiter(t, second.NonDurable(), p, clock)
	for range 5 {
		d, err := lim2.Take(context.Background(), "", throttle.Charge{Key: inboundKey(0), Cost: 1})
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	require.Equal(t, sqlstore.OptimisticStats{OneTrip: 4, Locked: 1}, second.OptimisticStats())
	require.Equal(t, []int64{100 - 5 - 5}, tokens(t, second, inboundKey(0)))
	require.Equal(t, sqlstore.OptimisticStats{}, sqlstoretest.MustOpen(t, sqlstore.SQLite, clock.Now).OptimisticStats(), "SQLite: no optimistic write")
}

// guardedStore is a throttle.Store whose transactions fail, after the
// limiter's apply, when a bucket would be left with more than max tokens:
// an apply whose error depends on the rows' state.
type guardedStore struct {
	throttle.Store
	max int64
}

var errTooFull = errors.New("a bucket would keep more tokens than the guard allows")

func (g guardedStore) Update(ctx context.Context, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error) error {
	return g.Store.Update(ctx, keys, credits, func(tx *throttle.Tx) error {
		if err := apply(tx); err != nil {
			return err
		}
		for _, w := range tx.BucketWrites() {
			if w.Bucket.Tokens > g.max {
				return errTooFull
			}
		}
		return nil
	})
}

// TestOptimisticApplyErrorOnStaleRowsIsNotTheAnswer: an apply that fails on
// the rows this store remembers, but not on the rows as another process
// left them, is run again on the locked rows, whose verdict is the batch's:
// the take succeeds. On the rows as they are, the failure still stands.
func TestOptimisticApplyErrorOnStaleRowsIsNotTheAnswer(t *testing.T) {
	clock := throttle.NewManualClock(throttletest.Epoch)
	dsn := sqlstoretest.DSN(t, sqlstore.Postgres)
	mine, other := sqlstoretest.MustOpenDSN(t, dsn, clock.Now), sqlstoretest.MustOpenDSN(t, dsn, clock.Now)
	p := inboundPolicy(10)
	key := inboundKey(1)
	take := func(lim *throttle.Limiter) error {
		_, err := lim.Take(context.Background(), "", throttle.Charge{Key: key, Cost: 1})
		return err
	}
	mineLim := newInboundLimiter(t, mine.NonDurable(), p, clock)
	for range 2 {
		require.NoError(t, take(mineLim))
	}
	otherLim := newInboundLimiter(t, other.NonDurable(), p, clock)
	for range 4 {
		require.NoError(t, take(otherLim))
	}
	require.Equal(t, []int64{10 - 6}, tokens(t, other, key))

	// mine remembers 8 tokens: a take there leaves 7, which the guard
	// refuses; on the row as it is, 4 tokens, it leaves 3.
	guarded := newInboundLimiter(t, guardedStore{Store: mine.NonDurable(), max: 5}, p, clock)
	require.NoError(t, take(guarded))
	require.Equal(t, []int64{10 - 7}, tokens(t, mine, key))
	require.Equal(t, sqlstore.OptimisticStats{OneTrip: 1, Locked: 2}, mine.OptimisticStats(), "the stale verdict is not the answer")

	strict := newInboundLimiter(t, guardedStore{Store: mine.NonDurable(), max: 0}, p, clock)
	require.ErrorIs(t, take(strict), errTooFull, "an error on the rows as they are is the answer")
	require.Equal(t, []int64{10 - 7}, tokens(t, mine, key), "nothing written")
}

// TestOptimisticSharedKeyStopsConflicting: two stores ("two processes
// behind a load balancer") alternate on one key. Each conflicts at most
// twice (its first insert, its first check on a row the other wrote);
// then the key is contended and takes the locking path only: the
// conflicts stop growing, and the decisions stay exact. A key one store
// owns keeps the one-round-trip path.
func TestOptimisticSharedKeyStopsConflicting(t *testing.T) {
	const capacity = 30
	clock := throttle.NewManualClock(throttletest.Epoch)
	dsn := sqlstoretest.DSN(t, sqlstore.Postgres)
	stores := []*sqlstore.Store{sqlstoretest.MustOpenDSN(t, dsn, clock.Now), sqlstoretest.MustOpenDSN(t, dsn, clock.Now)}
	p := inboundPolicy(capacity)
	var lims []*throttle.Limiter
	for _, s := range stores {
		lims = append(lims, newInboundLimiter(t, s.NonDurable(), p, clock))
	}
	shared, own := inboundKey(1), inboundKey(2)
	conflicts := func() int64 { return stores[0].OptimisticStats().Conflicts + stores[1].OptimisticStats().Conflicts }

	admitted := 0
	var after10 int64
	for i := range 40 {
		d, err := lims[i%2].Take(context.Background(), "", throttle.Charge{Key: shared, Cost: 1})
		require.NoError(t, err)
		if d.Allowed {
			admitted++
		}
		if i%2 == 0 {
			d, err := lims[0].Take(context.Background(), "", throttle.Charge{Key: own, Cost: 1})
			require.NoError(t, err)
			require.True(t, d.Allowed)
		}
		if i == 9 {
			after10 = conflicts()
		}
	}
	require.Equal(t, capacity, admitted, "the shared key admits its capacity, no more")
	require.Equal(t, []int64{0, capacity - 20}, tokens(t, stores[0], shared, own))
	require.LessOrEqual(t, after10, int64(4), "at most two conflicts per store")
	require.Equal(t, after10, conflicts(), "no conflict after the first ones")
	st := stores[0].OptimisticStats()
	t.Logf("store 0: %+v; store 1: %+v", st, stores[1].OptimisticStats())
	require.GreaterOrEqual(t, st.OneTrip, int64(19), "%+v: the key store 0 owns stays on the one-round-trip path", st)
}

// TestOptimisticWaitsOutALockOnce: a remembered row held FOR UPDATE by a
// stopped transaction makes the one-trip check wait out lock_timeout; the
// decision then fails as the locking path's would (ErrStoreUnavailable),
// within one lock_timeout, without waiting for the same lock a second time
// on the locking path.
func TestOptimisticWaitsOutALockOnce(t *testing.T) {
	ctx := context.Background()
	clock := throttle.NewManualClock(throttletest.Epoch)
	const lockTimeout = 500 * time.Millisecond
	dsn := sqlstoretest.DSN(t, sqlstore.Postgres)
	store := sqlstoretest.MustOpenDSN(t, dsn+"&lock_timeout=500ms", clock.Now)
	lim := newInboundLimiter(t, store.NonDurable(), inboundPolicy(100), clock)
	for range 3 { // the first on the locking path (a fresh store), then remembered
		d, err := lim.Take(ctx, "", throttle.Charge{Key: inboundKey(0), Cost: 1})
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	require.Equal(t, sqlstore.OptimisticStats{OneTrip: 2, Locked: 1}, store.OptimisticStats())

	_, driverDSN, err := sqlstore.ParseDSN(dsn)
	require.NoError(t, err)
	other, err := sql.Open("pgx", driverDSN)
	require.NoError(t, err)
	defer other.Close()
	holder, err := other.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer holder.Rollback() //nolint:errcheck
	_, err = holder.ExecContext(ctx, `SELECT * FROM balde_buckets FOR UPDATE`)
	require.NoError(t, err)

	dctx, cancel := context.WithTimeout(ctx, 30*time.Second) // keeps a regression from hanging
	defer cancel()
	start := time.Now()
	_, err = lim.Take(dctx, "", throttle.Charge{Key: inboundKey(0), Cost: 1})
	took := time.Since(start)
	require.ErrorIs(t, err, throttle.ErrStoreUnavailable)
	require.Less(t, took, 2*lockTimeout, "one lock_timeout, not one per path")
	require.Equal(t, sqlstore.OptimisticStats{OneTrip: 2, Locked: 1}, store.OptimisticStats(),
		"a lock wait is neither a conflict nor a reason to lock again")
}
