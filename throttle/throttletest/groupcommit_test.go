package throttletest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// TestGroupCommitStore runs the whole behaviour suite through a GroupCommit:
// one operation at a time it must behave exactly like the store below it.
func TestGroupCommitStore(t *testing.T) {
	throttletest.TestStore(t, func(t *testing.T, clock throttle.Clock) throttletest.FullStore {
		mem := throttletest.NewMemStore(clock)
		g := throttle.NewGroupCommit(mem, throttle.GroupCommitOptions{})
		t.Cleanup(func() { require.NoError(t, g.Close()) })
		return throttletest.WithReads(g, mem)
	})
}

// TestGroupCommitBatchesExactly sends many concurrent takes on a few hot
// keys through group commit: exactly the capacity of each key is admitted.
func TestGroupCommitBatchesExactly(t *testing.T) {
	ctx := context.Background()
	clock := throttle.NewManualClock(throttletest.Epoch)
	g := throttle.NewGroupCommit(throttletest.NewMemStore(clock.Now), throttle.GroupCommitOptions{MaxBatch: 64})
	t.Cleanup(func() { require.NoError(t, g.Close()) })
	p := throttle.Policy{Name: "P", Capacity: 100, RefillTokens: 1, RefillPeriod: time.Hour}
	// Without the refusal cache every take reaches the store.
	lim, err := throttle.NewLimiter(g, throttle.Policies{"P": p}, throttle.Config{Clock: clock.Now, RefusalCacheSize: -1})
	require.NoError(t, err)

	const workers, perWorker, keys = 16, 50, 4
	admitted := make([]int, keys)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				k := throttle.Key{Policy: "P", Env: "test", Identifier: fmt.Sprint("k", (w+i)%keys)}
				d, err := lim.Take(ctx, "", throttle.Charge{Key: k, Cost: 1})
				require.NoError(t, err)
				if d.Allowed {
					mu.Lock()
					admitted[(w+i)%keys]++
					mu.Unlock()
				}
			}
		})
	}
	waitfor.Group(t, &wg, 60*time.Second, "%d workers taking %d each", workers, perWorker)
	require.Equal(t, []int{100, 100, 100, 100}, admitted)
	batches, ops := g.Stats()
	require.Equal(t, int64(workers*perWorker), ops)
	t.Logf("%d takes in %d transactions", ops, batches)
}

// TestGroupCommitBatchesWhatQueued holds one transaction while 16 takes
// queue behind it: they are then committed as one batch.
func TestGroupCommitBatchesWhatQueued(t *testing.T) {
	ctx := context.Background()
	clock := throttle.NewManualClock(throttletest.Epoch)
	mem := throttletest.NewMemStore(clock.Now)
	gate, entered := make(chan struct{}), make(chan struct{})
	var once sync.Once
	held := &throttletest.Store{Base: mem, UpdateFn: func(ctx context.Context, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error) error {
		once.Do(func() { close(entered); <-gate })
		return mem.Update(ctx, keys, credits, apply)
	}}
	g := throttle.NewGroupCommit(held, throttle.GroupCommitOptions{MaxBatch: 64})
	t.Cleanup(func() { require.NoError(t, g.Close()) })
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release) // a failed test still ends the held transaction before Close
	p := throttle.Policy{Name: "P", Capacity: 10, RefillTokens: 1, RefillPeriod: time.Hour}
	lim, err := throttle.NewLimiter(g, throttle.Policies{"P": p}, throttle.Config{Clock: clock.Now, RefusalCacheSize: -1})
	require.NoError(t, err)
	take := func() throttle.Decision {
		d, err := lim.Take(ctx, "", throttle.Charge{Key: throttle.Key{Policy: "P", Env: "test", Identifier: "hot"}, Cost: 1})
		require.NoError(t, err)
		return d
	}
	first := make(chan throttle.Decision, 1)
	go func() { first <- take() }()
	waitfor.Recv(t, entered, 10*time.Second, "the first take entering its transaction")
	results := make(chan throttle.Decision, 16)
	for range 16 {
		go func() { results <- take() }()
	}
	// All 16 are queued behind the held transaction.
	waitfor.Until(t, 10*time.Second, func() bool { return g.Queued() >= 16 }, "16 takes queued (have %d)", g.Queued())
	release()
	require.True(t, waitfor.Recv(t, first, 10*time.Second, "the held take's decision").Allowed)
	admitted := 0
	for i := range 16 {
		if waitfor.Recv(t, results, 10*time.Second, "decision %d of the queued takes", i).Allowed {
			admitted++
		}
	}
	require.Equal(t, 9, admitted) // capacity 10, the first took one
	batches, ops := g.Stats()
	require.Equal(t, int64(2), batches, "the 16 queued takes share one transaction")
	require.Equal(t, int64(17), ops)
}

// TestGroupCommitIsolatesAFailingOperation checks that an operation whose
// apply fails gets its error while the others of its batch commit.
func TestGroupCommitIsolatesAFailingOperation(t *testing.T) {
	ctx := context.Background()
	clock := throttle.NewManualClock(throttletest.Epoch)
	mem := throttletest.NewMemStore(clock.Now)
	gate, entered := make(chan struct{}), make(chan struct{})
	var once sync.Once
	held := &throttletest.Store{Base: mem, UpdateFn: func(ctx context.Context, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error) error {
		// Hold the first transaction so that the next two queue up behind it.
		once.Do(func() { close(entered); <-gate })
		return mem.Update(ctx, keys, credits, apply)
	}}
	g := throttle.NewGroupCommit(held, throttle.GroupCommitOptions{})
	t.Cleanup(func() { require.NoError(t, g.Close()) })
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release) // a failed test still ends the held transaction before Close

	boom := errors.New("boom")
	key := throttle.Key{Policy: "P", Env: "test", Identifier: "a"}
	results := make(chan error, 3)
	go func() { results <- g.Update(ctx, []throttle.Key{key}, nil, func(*throttle.Tx) error { return nil }) }()
	waitfor.Recv(t, entered, 10*time.Second, "the first update entering its transaction")
	applied := make(chan struct{}, 1)
	go func() { results <- g.Update(ctx, []throttle.Key{key}, nil, func(*throttle.Tx) error { return boom }) }()
	go func() {
		results <- g.Update(ctx, []throttle.Key{key}, nil, func(*throttle.Tx) error {
			select {
			case applied <- struct{}{}:
			default:
			}
			return nil
		})
	}()
	// Both are queued behind the held transaction.
	waitfor.Until(t, 10*time.Second, func() bool { return g.Queued() >= 2 }, "2 updates queued")
	release()
	var errs []error
	for i := range 3 {
		errs = append(errs, waitfor.Recv(t, results, 10*time.Second, "result %d of 3 updates", i))
	}
	require.ElementsMatch(t, []error{nil, nil, boom}, errs)
	require.Len(t, applied, 1)
	// The held one alone, then the two together, then the good one again
	// without the failing one.
	batches, _ := g.Stats()
	require.Equal(t, int64(3), batches)
}
