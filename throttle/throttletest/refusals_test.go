package throttletest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// countingEnv is a limiter whose store counts its transactions.
type countingEnv struct {
	clock   *throttletest.FakeClock
	mem     *throttletest.MemStore
	updates *atomic.Int64
	lim     *throttle.Limiter
}

func newCountingEnv(t *testing.T, p throttle.Policy, cacheSize int) countingEnv {
	t.Helper()
	clock := throttletest.NewFakeClock(throttletest.Epoch)
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
		n, err := e.lim.CountLedger(ctx, throttle.LedgerQuery{Key: &cacheKey, Reasons: refused})
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
	rows, err := e.lim.Ledger(ctx, throttle.LedgerQuery{Key: &cacheKey, Reasons: refused, Limit: 1})
	require.NoError(t, err)
	require.Equal(t, last, rows[0].At)
}
