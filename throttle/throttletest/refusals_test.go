package throttletest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// countingEnv is a limiter whose store counts its transactions.
type countingEnv struct {
	clock   *throttle.ManualClock
	mem     *throttletest.MemStore
	updates *atomic.Int64
	lim     *throttle.Limiter
}

func newCountingEnv(t *testing.T, p throttle.Policy, cacheSize int) countingEnv {
	t.Helper()
	clock := throttle.NewManualClock(throttletest.Epoch)
	mem := throttletest.NewMemStore(clock.Now)
	var n atomic.Int64
	counting := &throttletest.Store{Base: mem, UpdateFn: func(ctx context.Context, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error) error {
		n.Add(1)
		return mem.Update(ctx, keys, credits, apply)
	}}
	lim, err := throttle.NewLimiter(counting, throttle.Policies{p.Name: p}, throttle.Config{Clock: clock.Now, RefusalCacheSize: cacheSize})
	require.NoError(t, err)
	return countingEnv{clock: clock, mem: mem, updates: &n, lim: lim}
}

func (e countingEnv) take(t *testing.T, k throttle.Key, cost int64) throttle.Decision {
	t.Helper()
	d, err := e.lim.Take(context.Background(), "", throttle.Charge{Key: k, Cost: cost})
	require.NoError(t, err)
	return d
}

var cacheKey = throttle.Key{Policy: "P", Env: "test", Identifier: "scanner"}

func TestRefusalCacheAnswersFromMemory(t *testing.T) {
	p := throttle.Policy{Name: "P", Capacity: 2, RefillTokens: 2, RefillPeriod: time.Minute}
	e := newCountingEnv(t, p, 0)
	e.take(t, cacheKey, 2)
	first := e.take(t, cacheKey, 1)
	require.False(t, first.Allowed)
	require.False(t, first.Cached)
	require.Equal(t, 30*time.Second, first.RetryAfter)
	require.Equal(t, int64(2), e.updates.Load())

	// A scanner hammering: answered from memory, with the exact wait and
	// balance the store would give.
	for range 1000 {
		d := e.take(t, cacheKey, 1)
		require.True(t, d.Cached)
		require.False(t, d.Allowed)
	}
	require.Equal(t, int64(2), e.updates.Load())
	e.clock.Advance(20 * time.Second)
	d := e.take(t, cacheKey, 1)
	require.Equal(t, throttle.Decision{
		Reason: throttle.ReasonEmpty, Key: cacheKey, Limit: 2, Remaining: 0,
		RetryAfter: 10 * time.Second, ResetAfter: 40 * time.Second, Cached: true,
		Buckets: []throttle.BucketDecision{{Key: cacheKey, Policy: p, Cost: 1, Reason: throttle.ReasonEmpty,
			RetryAfter: 10 * time.Second, ResetAfter: 40 * time.Second}},
	}, d)

	// At the instant the store said, the request goes to the store again.
	e.clock.Advance(10 * time.Second)
	require.True(t, e.take(t, cacheKey, 1).Allowed)
	require.Equal(t, int64(3), e.updates.Load())
}

func TestRefusalCacheForgetsOnCreditAndReset(t *testing.T) {
	ctx := context.Background()
	p := throttle.Policy{Name: "P", Capacity: 2, RefillTokens: 1, RefillPeriod: time.Hour}
	e := newCountingEnv(t, p, 0)
	e.take(t, cacheKey, 2)
	require.False(t, e.take(t, cacheKey, 1).Allowed)

	_, err := e.lim.Adjust(ctx, throttle.Adjustment{Key: cacheKey, Delta: 1, Reason: throttle.LedgerCredit, Ref: "E2E"})
	require.NoError(t, err)
	require.True(t, e.take(t, cacheKey, 1).Allowed, "a credit in this process is seen at once")

	require.False(t, e.take(t, cacheKey, 1).Allowed)
	_, err = e.lim.Reset(ctx, cacheKey, "alice")
	require.NoError(t, err)
	require.True(t, e.take(t, cacheKey, 1).Allowed, "a reset in this process is seen at once")
}

func TestRefusalCacheIsStricterAcrossProcesses(t *testing.T) {
	// Another process (another limiter on the same database) credits the
	// key: this process keeps refusing from memory until the retry-after it
	// was given. Stricter, never more generous.
	ctx := context.Background()
	p := throttle.Policy{Name: "P", Capacity: 2, RefillTokens: 1, RefillPeriod: time.Hour}
	e := newCountingEnv(t, p, 0)
	other, err := throttle.NewLimiter(e.mem, throttle.Policies{"P": p}, throttle.Config{Clock: e.clock.Now})
	require.NoError(t, err)
	e.take(t, cacheKey, 2)
	require.False(t, e.take(t, cacheKey, 1).Allowed)
	_, err = other.Adjust(ctx, throttle.Adjustment{Key: cacheKey, Delta: 2, Reason: throttle.LedgerRefund})
	require.NoError(t, err)

	d := e.take(t, cacheKey, 1)
	require.False(t, d.Allowed)
	require.True(t, d.Cached)
	d, err = other.Take(ctx, "", throttle.Charge{Key: cacheKey, Cost: 1})
	require.NoError(t, err)
	require.True(t, d.Allowed)
}

func TestRefusalCacheRespectsCostAndBound(t *testing.T) {
	p := throttle.Policy{Name: "P", Capacity: 5, RefillTokens: 1, RefillPeriod: time.Hour}
	e := newCountingEnv(t, p, 2)
	e.take(t, cacheKey, 4)
	require.False(t, e.take(t, cacheKey, 2).Allowed) // 1 left, 2 asked
	// A cheaper request may pass: it is not answered from the refusal.
	require.True(t, e.take(t, cacheKey, 1).Allowed)

	// With room for 2 entries, a third refused key evicts the oldest.
	keys := []throttle.Key{
		{Policy: "P", Env: "test", Identifier: "a"},
		{Policy: "P", Env: "test", Identifier: "b"},
		{Policy: "P", Env: "test", Identifier: "c"},
	}
	for _, k := range keys {
		e.take(t, k, 5)
		require.False(t, e.take(t, k, 1).Allowed)
	}
	before := e.updates.Load()
	require.True(t, e.take(t, keys[2], 1).Cached)
	require.True(t, e.take(t, keys[1], 1).Cached)
	require.False(t, e.take(t, keys[0], 1).Cached, "evicted: asked the store again")
	require.Equal(t, before+1, e.updates.Load())
}

func TestRefusalCacheDisabled(t *testing.T) {
	p := throttle.Policy{Name: "P", Capacity: 1, RefillTokens: 1, RefillPeriod: time.Hour}
	e := newCountingEnv(t, p, -1)
	e.take(t, cacheKey, 1)
	for range 3 {
		require.False(t, e.take(t, cacheKey, 1).Cached)
	}
	require.Equal(t, int64(4), e.updates.Load())
}

func TestRefusalsFromMemoryReachTheLedger(t *testing.T) {
	ctx := context.Background()
	p := throttle.Policy{Name: "P", Capacity: 1, RefillTokens: 1, RefillPeriod: time.Hour}
	e := newCountingEnv(t, p, 0)
	refused := []throttle.LedgerReason{throttle.LedgerRefusedEmpty}
	count := func() int64 {
		t.Helper()
		n, err := inspect.New(e.lim, e.mem).CountLedger(ctx, inspect.LedgerQuery{Key: &cacheKey, Reasons: refused})
		require.NoError(t, err)
		return n
	}
	e.take(t, cacheKey, 1)
	e.take(t, cacheKey, 1) // refused by the store: one row
	for range 10 {
		e.take(t, cacheKey, 1) // refused from memory
	}
	require.Equal(t, int64(1), count())
	require.NoError(t, e.lim.FlushRefusals(ctx))
	require.Equal(t, int64(11), count())
	require.NoError(t, e.lim.FlushRefusals(ctx))
	require.Equal(t, int64(11), count(), "nothing is written twice")

	// A key hammered only from memory is written at least once a minute,
	// without anyone calling FlushRefusals.
	before := e.updates.Load()
	for range 30 {
		e.clock.Advance(3 * time.Second)
		require.True(t, e.take(t, cacheKey, 1).Cached)
	}
	require.Equal(t, before+1, e.updates.Load())
	require.GreaterOrEqual(t, count(), int64(11+20))

	// The rest of the group rides along with the next transaction after
	// the entry expired, stamped with the time of the last refusal.
	last := e.clock.Now()
	e.clock.Advance(time.Hour)
	require.True(t, e.take(t, cacheKey, 1).Allowed)
	require.Equal(t, int64(11+30), count())
	rows, err := inspect.New(e.lim, e.mem).Ledger(ctx, inspect.LedgerQuery{Key: &cacheKey, Reasons: refused, Limit: 1})
	require.NoError(t, err)
	require.Equal(t, last, rows[0].At)
}

// TestRefusalCacheBlockShorterThanWindow is the case of issue 23.5: window
// 10 s, block 3 s. Without the cache the refusal at 7.5 s (the block long
// over, the window still full) blocks the key again until 10.5 s; the cache
// must not answer it from memory and admit at 10 s.
func TestRefusalCacheBlockShorterThanWindow(t *testing.T) {
	p := throttle.Policy{Name: "P", Refill: throttle.RefillRolling, Capacity: 2, RefillTokens: 2,
		RefillPeriod: 10 * time.Second, BlockFor: 3 * time.Second}
	e := newCountingEnv(t, p, 0)
	e.take(t, cacheKey, 1)
	e.take(t, cacheKey, 1)
	e.clock.Advance(500 * time.Millisecond)
	require.False(t, e.take(t, cacheKey, 1).Allowed) // blocked until 3.5 s

	e.clock.Advance(7 * time.Second) // 7.5 s
	d := e.take(t, cacheKey, 1)
	require.False(t, d.Allowed)
	require.False(t, d.Cached, "a refusal that starts a block is the store's to write")
	require.Equal(t, throttle.ReasonBlocked, d.Reason)
	require.Equal(t, 3*time.Second, d.RetryAfter)

	e.clock.Advance(2500 * time.Millisecond) // 10 s: the window is free, the block is not
	d = e.take(t, cacheKey, 1)
	require.False(t, d.Allowed)
	require.True(t, d.Cached, "inside the block, memory answers")
	require.Equal(t, 500*time.Millisecond, d.RetryAfter)
	e.clock.Advance(500 * time.Millisecond)
	require.True(t, e.take(t, cacheKey, 1).Allowed)
}

// TestRefusalCacheDecidesAsTheStore runs the same random sequences of
// requests (costs, gaps, keys) through a limiter with the refusal cache and
// one without, each on its own store and one fake clock, and requires
// identical decisions: policies with blocks shorter than, equal to and
// longer than their window, no block, a cooldown, and takes charging two
// keys at once.
func TestRefusalCacheDecidesAsTheStore(t *testing.T) {
	window := 10 * time.Second
	policies := []throttle.Policy{
		{Name: "R", Refill: throttle.RefillRolling, Capacity: 3, RefillTokens: 3, RefillPeriod: window},
		{Name: "R", Refill: throttle.RefillRolling, Capacity: 3, RefillTokens: 3, RefillPeriod: window, BlockFor: 3 * time.Second},
		{Name: "R", Refill: throttle.RefillRolling, Capacity: 3, RefillTokens: 3, RefillPeriod: window, BlockFor: window},
		{Name: "R", Refill: throttle.RefillRolling, Capacity: 1, RefillTokens: 1, RefillPeriod: window, BlockFor: 15 * time.Second},
		{Name: "R", Refill: throttle.RefillStepwise, Capacity: 4, RefillTokens: 2, RefillPeriod: window, BlockFor: 2 * time.Second},
		{Name: "R", Capacity: 3, RefillTokens: 1, RefillPeriod: 4 * time.Second, MinInterval: 2 * time.Second, BlockFor: time.Second},
	}
	// The second key of two-key takes: no block, as a DICT PSP bucket.
	psp := throttle.Policy{Name: "S", Capacity: 4, RefillTokens: 1, RefillPeriod: 3 * time.Second}
	keyR := throttle.Key{Policy: "R", Env: "test", Identifier: "client"}
	keyS := throttle.Key{Policy: "S", Env: "test", Identifier: "psp"}
	ctx := context.Background()
	for pi, p := range policies {
		for seed := range int64(40) {
			rng := rand.New(rand.NewPCG(uint64(pi), uint64(seed)))
			clock := throttle.NewManualClock(throttletest.Epoch)
			resolver := throttle.Policies{"R": p, "S": psp}
			cached, err := throttle.NewLimiter(throttletest.NewMemStore(clock.Now), resolver, throttle.Config{Clock: clock.Now})
			require.NoError(t, err)
			direct, err := throttle.NewLimiter(throttletest.NewMemStore(clock.Now), resolver, throttle.Config{Clock: clock.Now, RefusalCacheSize: -1})
			require.NoError(t, err)
			fromMemory := 0
			for step := range 300 {
				clock.Advance(time.Duration(rng.IntN(12)) * 250 * time.Millisecond)
				charges := []throttle.Charge{{Key: keyR, Cost: 1 + rng.Int64N(p.Capacity)}}
				switch rng.IntN(4) {
				case 0:
					charges = []throttle.Charge{{Key: keyS, Cost: 1 + rng.Int64N(2)}}
				case 1:
					charges = append(charges, throttle.Charge{Key: keyS, Cost: 1})
				}
				want, err := direct.Take(ctx, "", charges...)
				require.NoError(t, err)
				got, err := cached.Take(ctx, "", charges...)
				require.NoError(t, err)
				if got.Cached {
					fromMemory++
				}
				at := fmt.Sprintf("policy %d seed %d step %d at %s, charges %v", pi, seed, step, clock.Now().Sub(throttletest.Epoch), charges)
				require.Equal(t, want.Allowed, got.Allowed, at)
				if len(charges) == 1 {
					// One key: the whole decision is the store's.
					require.Equal(t, want.Reason, got.Reason, at)
					require.Equal(t, want.RetryAfter, got.RetryAfter, at)
					require.Equal(t, want.Remaining, got.Remaining, at)
					require.Equal(t, want.ResetAfter, got.ResetAfter, at)
				} else if !want.Allowed {
					// Two keys from memory: the remembered key's refusal, never
					// a shorter wait than the one the store gives for it.
					i := slices.IndexFunc(want.Buckets, func(bd throttle.BucketDecision) bool { return bd.Key == got.Key })
					require.GreaterOrEqual(t, i, 0, at)
					require.Equal(t, want.Buckets[i].RetryAfter, got.RetryAfter, at)
				}
			}
			if pi == 0 && seed == 0 {
				require.Positive(t, fromMemory, "the comparison exercises the cache")
			}
		}
	}
}

// A key refused by the store again while remembered (here for a cheaper
// charge than the one remembered) keeps the refusals memory answered
// meanwhile: they reach the ledger.
func TestRefusalsFromMemorySurviveANewRefusal(t *testing.T) {
	ctx := context.Background()
	p := throttle.Policy{Name: "P", Capacity: 2, RefillTokens: 1, RefillPeriod: time.Hour}
	e := newCountingEnv(t, p, 0)
	require.True(t, e.take(t, cacheKey, 2).Allowed)
	require.False(t, e.take(t, cacheKey, 2).Cached) // the store refuses, remembered for 2
	for range 5 {
		require.True(t, e.take(t, cacheKey, 2).Cached)
	}
	d := e.take(t, cacheKey, 1) // the store refuses again: a new entry
	require.False(t, d.Allowed)
	require.False(t, d.Cached)
	require.NoError(t, e.lim.FlushRefusals(ctx))
	n, err := inspect.New(e.lim, e.mem).CountLedger(ctx, inspect.LedgerQuery{Key: &cacheKey, Reasons: throttle.RefusalReasons})
	require.NoError(t, err)
	require.EqualValues(t, 7, n, "every refusal counted once")
}
