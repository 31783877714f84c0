package dict_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// gate is a Batch.Sleep on the env's fake clock that holds every wait
// until open is called, then moves both clocks by the wait. A wait still
// held after the deadline fails the test (a batch that blocks behind a
// waiting payer would hold it forever).
type gate struct {
	e      *env
	opened chan struct{}
	once   sync.Once
	mu     sync.Mutex
	slept  []time.Duration
}

func newGate(e *env) *gate { return &gate{e: e, opened: make(chan struct{})} }

func (g *gate) open() { g.once.Do(func() { close(g.opened) }) }

func (g *gate) sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-g.opened:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		g.e.t.Errorf("a wait of %s was held 30 s: the batch waited for it before going on", d)
		return context.DeadlineExceeded
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.slept = append(g.slept, d)
	g.e.clock.Advance(d)
	resp, err := http.Post(g.e.simURL+"/sim/clock?advance="+d.String(), "", nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// TestBatchDrainedPayerDoesNotHoldBackOthers: one payer whose bucket is
// empty and three full ones, with Wait: every line of the full payers is
// answered while the drained payer's first wait is still held; the drained
// payer's lines go after it, in their order; the results come out in input
// order. (Before, lines went one at a time: the whole file waited behind
// the drained payer.)
func TestBatchDrainedPayerDoesNotHoldBackOthers(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		e := newEnv(t, engine, envConfig{})
		drained, full := makeCPF(1), []string{makeCPF(2), makeCPF(3), makeCPF(4)}
		for i := range 5 { // 5 x 404 at 20 tokens: the PF bucket of 100 is empty
			requireNotFound(t, e.lookup(unknownEmail(i), drained))
		}
		require.LessOrEqual(t, e.tokens(dict.PolicyEntriesReadUserAntiscan, drained), int64(0))

		const rounds = 3
		var reqs []dict.LookupRequest
		for range rounds {
			reqs = append(reqs, dict.LookupRequest{Key: knownPhone, PayerID: drained})
			for _, p := range full {
				reqs = append(reqs, dict.LookupRequest{Key: knownEmail, PayerID: p})
			}
		}

		g := newGate(e)
		fullLeft := rounds * len(full)
		var doneOrder []int
		var waits int
		b := dict.Batch{Client: e.client, Wait: true, MaxWait: time.Hour, Sleep: g.sleep,
			Progress: func(ev dict.BatchEvent) {
				switch ev.Kind {
				case dict.BatchWaiting:
					require.Equal(t, drained, ev.Request.PayerID)
					require.Positive(t, ev.Wait)
					waits++
				case dict.BatchDone:
					doneOrder = append(doneOrder, ev.Index)
					if ev.Request.PayerID != drained {
						if fullLeft--; fullLeft == 0 {
							g.open() // the drained payer may wait now
						}
					}
				}
			}}
		var got []dict.BatchResult
		err := b.Run(e.ctx, reqs, func(r dict.BatchResult) error {
			got = append(got, r)
			return nil
		})
		require.NoError(t, err)

		// Every full payer's line ended before any line of the drained one.
		require.Len(t, doneOrder, len(reqs))
		for _, i := range doneOrder[:rounds*len(full)] {
			require.NotEqual(t, drained, reqs[i].PayerID, "done order %v", doneOrder)
		}
		// The drained payer's lines ended in their order.
		var drainedOrder []int
		for _, i := range doneOrder {
			if reqs[i].PayerID == drained {
				drainedOrder = append(drainedOrder, i)
			}
		}
		require.Equal(t, []int{0, 4, 8}, drainedOrder)

		// Results in input order, every lookup answered 200; only the
		// drained payer waited (its first line at least: a refill step may
		// bring more than one token).
		require.Len(t, got, len(reqs))
		for i, r := range got {
			require.Equal(t, i, r.Index)
			require.Equal(t, reqs[i], r.Request)
			require.NoError(t, r.Err, "line %d", i)
			require.True(t, r.Decision.Allowed, "line %d", i)
			require.NotNil(t, r.Response, "line %d", i)
			if i == 0 {
				require.Positive(t, r.Waited, "line %d", i)
			}
			if r.Request.PayerID != drained {
				require.Zero(t, r.Waited, "line %d", i)
			}
		}
		require.Positive(t, waits)
		require.Len(t, g.slept, waits)
		require.Equal(t, int64(len(reqs)), e.stats().Count(dict.OpGetEntry, http.StatusOK))
		require.Zero(t, e.stats().Total(http.StatusTooManyRequests))
	})
}

// TestBatchNoWaitAndMaxWait: without Wait a refused lookup ends refused at
// once, unsent; with a MaxWait shorter than the refusal's RetryAfter too.
// The other payers' lines are answered either way.
func TestBatchNoWaitAndMaxWait(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite, envConfig{})
	drained, other := makeCPF(1), makeCPF(2)
	for i := range 5 {
		requireNotFound(t, e.lookup(unknownEmail(i), drained))
	}
	reqs := []dict.LookupRequest{{Key: knownPhone, PayerID: drained}, {Key: knownPhone, PayerID: other}}
	for _, b := range []dict.Batch{
		{Client: e.client, Sleep: newGate(e).sleep},
		{Client: e.client, Wait: true, MaxWait: time.Second, Sleep: newGate(e).sleep},
	} {
		var got []dict.BatchResult
		require.NoError(t, b.Run(e.ctx, reqs, func(r dict.BatchResult) error { got = append(got, r); return nil }))
		require.Len(t, got, 2)
		require.False(t, got[0].Decision.Allowed)
		require.Positive(t, got[0].Decision.RetryAfter)
		require.NoError(t, got[0].Err)
		require.False(t, got[0].Interrupted)
		require.Zero(t, got[0].Waited)
		require.True(t, got[1].Decision.Allowed)
		require.NoError(t, got[1].Err)
	}
	require.Equal(t, int64(2), e.stats().Count(dict.OpGetEntry, http.StatusOK))
}

// TestBatchInterrupted: ctx ends while a payer waits: its lookup ends
// Interrupted (unsent), lookups not started are not delivered, Run returns
// ctx's error.
func TestBatchInterrupted(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite, envConfig{})
	drained := makeCPF(1)
	for i := range 5 {
		requireNotFound(t, e.lookup(unknownEmail(i), drained))
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	reqs := []dict.LookupRequest{{Key: knownPhone, PayerID: drained}, {Key: knownEmail, PayerID: drained}}
	b := dict.Batch{Client: e.client, Wait: true, Sleep: newGate(e).sleep, Progress: func(ev dict.BatchEvent) {
		if ev.Kind == dict.BatchWaiting {
			cancel() // Ctrl-C during the wait
		}
	}}
	var got []dict.BatchResult
	err := b.Run(ctx, reqs, func(r dict.BatchResult) error { got = append(got, r); return nil })
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, got, 1)
	require.True(t, got[0].Interrupted)
	require.False(t, got[0].Decision.Allowed)
	require.Zero(t, e.stats().Count(dict.OpGetEntry, http.StatusOK))
}
