package throttletest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// blockedBatch starts a GroupCommit over a store whose first transaction
// is held until the returned release is called, so that the operations
// sent next queue up and form the second batch, whose Update sends its ctx
// on inTx and then runs wait(ctx) instead of applying anything.
func blockedBatch(t *testing.T, wait func(ctx context.Context) error) (g *throttle.GroupCommit, release func(), inTx <-chan context.Context) {
	t.Helper()
	mem := throttletest.NewMemStore(throttle.NewManualClock(throttletest.Epoch).Now)
	gate, entered := make(chan struct{}), make(chan struct{})
	second := make(chan context.Context, 1)
	var calls int
	var mu sync.Mutex
	store := &throttletest.Store{Base: mem, UpdateFn: func(ctx context.Context, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error) error {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			close(entered)
			<-gate
			return mem.Update(ctx, keys, credits, apply)
		}
		second <- ctx
		if err := wait(ctx); err != nil {
			return err
		}
		return mem.Update(ctx, keys, credits, apply)
	}}
	g = throttle.NewGroupCommit(store, throttle.GroupCommitOptions{})
	release = sync.OnceFunc(func() { close(gate) })
	t.Cleanup(func() { require.NoError(t, g.Close()) })
	t.Cleanup(release)
	key := throttle.Key{Policy: "P", Env: "test", Identifier: "held"}
	go func() {
		_ = g.Update(context.Background(), []throttle.Key{key}, nil, func(*throttle.Tx) error { return nil })
	}()
	waitfor.Recv(t, entered, 10*time.Second, "the first update entering its transaction")
	return g, release, second
}

// TestGroupCommitBatchOfEndedCallersStops: a batch waiting in the store
// (for a lock held by a stopped process) stops waiting once every caller
// in it has gone, and each caller gets its ctx's error promptly: a process
// told to stop does not wait out the lock.
func TestGroupCommitBatchOfEndedCallersStops(t *testing.T) {
	g, release, inTx := blockedBatch(t, func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(30 * time.Second):
			return errors.New("the batch's ctx was not cancelled within 30 s")
		}
	})
	key := throttle.Key{Policy: "P", Env: "test", Identifier: "a"}
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	ctxB, cancelB := context.WithTimeout(context.Background(), time.Hour)
	defer cancelB()
	results := make(chan error, 2)
	for _, ctx := range []context.Context{ctxA, ctxB} {
		go func() { results <- g.Update(ctx, []throttle.Key{key}, nil, func(*throttle.Tx) error { return nil }) }()
	}
	waitfor.Until(t, 10*time.Second, func() bool { return g.Queued() >= 2 }, "2 updates queued")
	release()
	waitfor.Recv(t, inTx, 10*time.Second, "the batch of the two entering its transaction")
	cancelA()
	cancelB()
	start := time.Now()
	errs := []error{
		waitfor.Recv(t, results, 5*time.Second, "the first caller's answer"),
		waitfor.Recv(t, results, 5*time.Second, "the second caller's answer"),
	}
	require.Less(t, time.Since(start), time.Second, "answered promptly once every caller was gone")
	require.ElementsMatch(t, []error{context.Canceled, context.Canceled}, errs)
}

// TestGroupCommitBatchWithAWaitingCallerGoesOn: while one caller of a
// batch still waits, the batch is not cancelled when the others leave:
// their operations are applied and reported (Update's contract).
func TestGroupCommitBatchWithAWaitingCallerGoesOn(t *testing.T) {
	proceed := make(chan struct{})
	cancelled := make(chan struct{}, 1)
	g, release, inTx := blockedBatch(t, func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			cancelled <- struct{}{}
			return ctx.Err()
		case <-proceed:
			return nil
		}
	})
	key := throttle.Key{Policy: "P", Env: "test", Identifier: "a"}
	ctxGone, cancelGone := context.WithCancel(context.Background())
	defer cancelGone()
	ctxWaiting, cancelWaiting := context.WithCancel(context.Background())
	defer cancelWaiting()
	applied := make(chan string, 2)
	results := make(chan error, 2)
	for name, ctx := range map[string]context.Context{"gone": ctxGone, "waiting": ctxWaiting} {
		go func() {
			results <- g.Update(ctx, []throttle.Key{key}, nil, func(*throttle.Tx) error {
				applied <- name
				return nil
			})
		}()
	}
	waitfor.Until(t, 10*time.Second, func() bool { return g.Queued() >= 2 }, "2 updates queued")
	release()
	waitfor.Recv(t, inTx, 10*time.Second, "the batch of the two entering its transaction")
	cancelGone()
	// A window to see a wrong cancellation in (it would come within
	// microseconds); not a synchronisation.
	select {
	case <-cancelled:
		t.Fatal("the batch was cancelled while one of its callers still waited")
	case <-time.After(200 * time.Millisecond):
	}
	close(proceed)
	for i := range 2 {
		require.NoError(t, waitfor.Recv(t, results, 10*time.Second, "answer %d of 2", i))
	}
	require.ElementsMatch(t, []string{"gone", "waiting"}, []string{<-applied, <-applied})
}

// TestGroupCommitCancelledInDoubtIsReported: a batch cancelled once its
// callers left, whose store reports the outcome unknown (the cancellation
// came while the COMMIT was in flight), answers that, not the callers' ctx
// errors: it may have been applied.
func TestGroupCommitCancelledInDoubtIsReported(t *testing.T) {
	g, release, inTx := blockedBatch(t, func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return errors.Join(throttle.ErrOutcomeUnknown, ctx.Err())
		case <-time.After(30 * time.Second):
			return errors.New("the batch's ctx was not cancelled within 30 s")
		}
	})
	key := throttle.Key{Policy: "P", Env: "test", Identifier: "a"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	results := make(chan error, 1)
	go func() { results <- g.Update(ctx, []throttle.Key{key}, nil, func(*throttle.Tx) error { return nil }) }()
	waitfor.Until(t, 10*time.Second, func() bool { return g.Queued() >= 1 }, "the update queued")
	release()
	waitfor.Recv(t, inTx, 10*time.Second, "the batch entering its transaction")
	cancel()
	err := waitfor.Recv(t, results, 5*time.Second, "the caller's answer")
	require.ErrorIs(t, err, throttle.ErrOutcomeUnknown)
}
