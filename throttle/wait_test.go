package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// waitEnv is a limiter of one cooldown policy (10 s between sends) on a
// fake clock, with a Sleep that moves the clock and records its waits.
type waitEnv struct {
	clock  *throttle.ManualClock
	lim    *throttle.Limiter
	key    throttle.Key
	slept  []time.Duration
	waiter throttle.Waiter
}

func newWaitEnv(t *testing.T) *waitEnv {
	t.Helper()
	e := &waitEnv{clock: throttle.NewManualClock(throttletest.Epoch)}
	p := throttle.Policy{Name: "LOT", Capacity: 10, RefillTokens: 10, RefillPeriod: time.Minute, MinInterval: 10 * time.Second}
	var err error
	e.lim, err = throttle.NewLimiter(throttletest.NewMemStore(e.clock.Now), throttle.Policies{p.Name: p}, throttle.Config{Clock: e.clock.Now})
	require.NoError(t, err)
	e.key = throttle.Key{Policy: p.Name, Env: "test", Identifier: "80012345"}
	e.waiter = throttle.Waiter{Limiter: e.lim, Sleep: func(ctx context.Context, d time.Duration) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		e.slept = append(e.slept, d)
		e.clock.Advance(d)
		return nil
	}}
	return e
}

func (e *waitEnv) wait(ctx context.Context) (throttle.Decision, error) {
	return e.waiter.Wait(ctx, "", throttle.Charge{Key: e.key, Cost: 1})
}

func TestWaitSleepsTheExactRetryAfter(t *testing.T) {
	e := newWaitEnv(t)
	start := e.clock.Now()
	for i := range 3 {
		d, err := e.wait(t.Context())
		require.NoError(t, err, "send %d", i)
		require.True(t, d.Allowed, "send %d", i)
	}
	require.Equal(t, []time.Duration{10 * time.Second, 10 * time.Second}, e.slept)
	require.Equal(t, 20*time.Second, e.clock.Now().Sub(start), "admitted at the first instant the cooldown allows")
}

func TestWaitReturnsAtOnceWhenTheDeadlineIsTooClose(t *testing.T) {
	e := newWaitEnv(t)
	_, err := e.wait(t.Context())
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // the wait is 10 s
	defer cancel()
	d, err := e.wait(ctx)
	require.False(t, d.Allowed)
	require.Empty(t, e.slept, "no sleep that cannot end in an admission")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	got, ok := throttle.AsRefusal(err)
	require.True(t, ok, "the refusal travels with the error")
	require.Equal(t, 10*time.Second, got.RetryAfter)
	require.Equal(t, throttle.ReasonCooldown, got.Reason)
}

func TestWaitEndsWithItsContext(t *testing.T) {
	e := newWaitEnv(t)
	_, err := e.wait(t.Context())
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	e.waiter.Sleep = func(context.Context, time.Duration) error {
		cancel() // Ctrl-C during the wait
		return context.Canceled
	}
	d, err := e.wait(ctx)
	require.False(t, d.Allowed)
	require.ErrorIs(t, err, context.Canceled)
	var refused *throttle.RefusedError
	require.True(t, errors.As(err, &refused))

	_, err = e.wait(ctx)
	require.ErrorIs(t, err, context.Canceled, "an ended context takes nothing")
	st, err := e.lim.State(t.Context(), e.key)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.SendCount, "only the first send was taken")
}

func TestWaitPassesTakeErrorsThrough(t *testing.T) {
	e := newWaitEnv(t)
	_, err := e.waiter.Wait(t.Context(), "", throttle.Charge{Key: throttle.Key{Policy: "NOPE", Env: "test", Identifier: "x"}, Cost: 1})
	require.ErrorIs(t, err, throttle.ErrUnknownPolicy)
	require.Empty(t, e.slept)
}

// A batch sender waits its turn before each lot instead of a loop of its
// own; the fake clock's Sleep shows the waits.
func ExampleWaiter_Wait() {
	clock := throttle.NewManualClock(throttletest.Epoch)
	lot := throttle.Policy{Name: "SIFEN_RECEPCION_LOTE", Capacity: 1, RefillTokens: 1, RefillPeriod: 10 * time.Second}
	lim, _ := throttle.NewLimiter(throttletest.NewMemStore(clock.Now), throttle.Policies{lot.Name: lot}, throttle.Config{Clock: clock.Now})
	w := throttle.Waiter{Limiter: lim, Sleep: func(_ context.Context, d time.Duration) error {
		fmt.Println("waiting", d)
		clock.Advance(d)
		return nil
	}} // production: lim.Wait(ctx, ...) sleeps on the wall clock
	key := throttle.Key{Policy: lot.Name, Env: "test", Identifier: "80012345"}
	for i := range 3 {
		if _, err := w.Wait(context.Background(), fmt.Sprint("lot-", i), throttle.Charge{Key: key, Cost: 1}); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("sending lot", i)
	}
	// Output:
	// sending lot 0
	// waiting 10s
	// sending lot 1
	// waiting 10s
	// sending lot 2
}

// TestDoRetriesAnOperationThatTakesItsOwnTokens: Do calls the operation
// again only after each refusal's RetryAfter, tells Refused of each
// refusal before sleeping, and stops at the first answer that is not a
// refusal, or at the sleep's own error (a batch command's --max-wait).
func TestDoRetriesAnOperationThatTakesItsOwnTokens(t *testing.T) {
	e := newWaitEnv(t)
	var refused []time.Duration
	e.waiter.Refused = func(d throttle.Decision) { refused = append(refused, d.RetryAfter) }
	calls := 0
	send := func(ctx context.Context) (throttle.Decision, error) {
		calls++
		return e.lim.Take(ctx, "lot", throttle.Charge{Key: e.key, Cost: 1})
	}
	for range 2 {
		d, err := e.waiter.Do(t.Context(), send)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	require.Equal(t, 3, calls, "one refused call, then admitted after the wait")
	require.Equal(t, []time.Duration{10 * time.Second}, refused)
	require.Equal(t, []time.Duration{10 * time.Second}, e.slept)

	bound := errors.New("beyond --max-wait")
	e.waiter.Sleep = func(context.Context, time.Duration) error { return bound }
	d, err := e.waiter.Do(t.Context(), send)
	require.ErrorIs(t, err, bound)
	got, ok := throttle.AsRefusal(err)
	require.True(t, ok, "the refusal travels with the sleep's error")
	require.Equal(t, d, got)
	require.Equal(t, throttle.ReasonCooldown, d.Reason)

	failure := errors.New("connection refused")
	_, err = e.waiter.Do(t.Context(), func(context.Context) (throttle.Decision, error) { return throttle.Decision{}, failure })
	require.ErrorIs(t, err, failure, "a failure is returned at once, not waited out")
}
