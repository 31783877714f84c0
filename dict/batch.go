package dict

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// Batch looks up many keys (getEntry) through a Client. Each payer's
// lookups go one after another, in order, beside the other payers'; a payer
// whose bucket is empty waits (Wait) without holding back the others. At most
// Senders lookups are in flight and at most Lanes payers worked on at once (a
// waiting payer holds a lane, not a sender).
//
// Set Client. A Batch may be reused but not run twice at the same time.
type Batch struct {
	Client *Client
	// Wait makes a lookup the mirror refuses sleep the refusal's RetryAfter
	// and try again, up to MaxWait in all (0: no bound); without Wait, or
	// beyond MaxWait, it ends refused.
	Wait    bool
	MaxWait time.Duration
	Senders int            // lookups in flight at once (default DefaultBatchSenders)
	Lanes   int            // payers worked on at once (default defaultBatchLanes)
	Sleep   throttle.Sleep // default throttle.SleepContext
	// Progress, when set, is told of every event as it happens. It is never
	// called concurrently with itself or with Run's deliver, and must not
	// block for long.
	Progress func(BatchEvent)
}

// Defaults of Batch.
const (
	DefaultBatchSenders = 4
	defaultBatchLanes   = 64
)

// BatchEventKind says what a BatchEvent reports.
type BatchEventKind int

const (
	BatchWaiting BatchEventKind = iota + 1 // a lookup refused by the mirror sleeps Wait
	batchDone                              // a lookup ended (in the order they end)
)

// BatchEvent is one event of a running Batch.
type BatchEvent struct {
	Kind     BatchEventKind
	Index    int // the lookup's position in Run's input
	Request  LookupRequest
	Decision throttle.Decision // a BatchWaiting's refusal
	Wait     time.Duration     // and the time it will sleep
	Result   *BatchResult      // a batchDone's result
}

// BatchResult is how one lookup of a Batch ended. Index is its position in
// Run's input; a refusal (nothing sent) has a nil Err; Waited is the time it
// slept while refused.
type BatchResult struct {
	Index   int
	Request LookupRequest
	Result[GetEntryResponse]
	Err    error
	Waited time.Duration
	// Interrupted: Run's ctx ended while the lookup was waiting (it ended
	// refused, unsent); else a refused lookup ended past MaxWait or without Wait.
	Interrupted bool
}

// Run looks up reqs and calls deliver once per lookup with its result, in
// input order, on Run's goroutine. It returns nil when every lookup was
// delivered. Otherwise it stops starting lookups, lets those in flight
// finish, delivers every result it has, in input order, and returns:
//   - ctx's error when ctx ended (waiting lookups end Interrupted);
//   - an error wrapping throttle.ErrStoreUnavailable when the mirror could
//     not decide (nothing was sent for that lookup); a commit whose answer
//     was lost (throttle.ErrOutcomeUnknown) is that lookup's Err instead,
//     and the run goes on;
//   - deliver's error.
//
// Bad input is a result's Err, not a stop.
func (b *Batch) Run(ctx context.Context, reqs []LookupRequest, deliver func(BatchResult) error) error {
	if b.Client == nil {
		return errors.New("dict: batch has no Client")
	}
	lanes, senders := cmp.Or(max(b.Lanes, 0), defaultBatchLanes), cmp.Or(max(b.Senders, 0), DefaultBatchSenders)
	r := &batchRun{b: b, ctx: ctx, senders: make(chan struct{}, senders), results: make(chan BatchResult)}
	r.stopCtx, r.stop = context.WithCancelCause(ctx)
	defer r.stop(nil)

	// One lane per payer, in the order payers first appear.
	var order []string
	byPayer := map[string][]int{}
	for i, q := range reqs {
		if _, ok := byPayer[q.PayerID]; !ok {
			order = append(order, q.PayerID)
		}
		byPayer[q.PayerID] = append(byPayer[q.PayerID], i)
	}

	var wg sync.WaitGroup
	go func() {
		laneSlots := make(chan struct{}, lanes)
	start:
		for _, payer := range order {
			select {
			case laneSlots <- struct{}{}:
			case <-r.stopCtx.Done():
				break start
			}
			wg.Go(func() {
				defer func() { <-laneSlots }()
				r.lane(reqs, byPayer[payer])
			})
		}
		wg.Wait()
		close(r.results)
	}()

	// The reorder buffer: results[i] once lookup i ended.
	done := make([]*BatchResult, len(reqs))
	next := 0
	var deliverErr error
	for res := range r.results {
		done[res.Index] = &res
		r.progress(BatchEvent{Kind: batchDone, Index: res.Index, Request: res.Request, Result: &res})
		for deliverErr == nil && next < len(done) && done[next] != nil {
			deliverErr = r.deliver(deliver, *done[next])
			next++
		}
		if deliverErr != nil {
			r.stop(deliverErr)
		}
	}
	// Stopped: what ended after a lookup that never started.
	complete := next == len(done)
	for ; deliverErr == nil && next < len(done); next++ {
		if done[next] != nil {
			deliverErr = r.deliver(deliver, *done[next])
		}
	}
	switch cause := context.Cause(r.stopCtx); {
	case deliverErr != nil:
		return deliverErr
	case ctx.Err() != nil:
		return ctx.Err()
	case cause != nil && !errors.Is(cause, context.Canceled):
		return cause
	case !complete:
		return errors.New("dict: batch: a lookup ended without a result")
	}
	return nil
}

// batchRun is the state of one Batch.Run.
type batchRun struct {
	b       *Batch
	ctx     context.Context // the caller's
	stopCtx context.Context // ends with ctx, a store failure or deliver's error
	stop    context.CancelCauseFunc
	senders chan struct{}
	results chan BatchResult
	mu      sync.Mutex // serializes Progress and deliver
}

func (r *batchRun) progress(ev BatchEvent) {
	if r.b.Progress == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.b.Progress(ev)
}

func (r *batchRun) deliver(deliver func(BatchResult) error, res BatchResult) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return deliver(res)
}

// lane looks up one payer's lookups idx, in order, until done or stopped.
func (r *batchRun) lane(reqs []LookupRequest, idx []int) {
	for _, i := range idx {
		if r.stopCtx.Err() != nil {
			return
		}
		res, ok := r.lookup(i, reqs[i])
		if !ok {
			return
		}
		r.results <- res
	}
}

// lookup runs lookup i, waiting while refused (Batch.Wait, within MaxWait
// and ctx's deadline). ok is false when the result must not be delivered:
// the run stopped before it was sent.
func (r *batchRun) lookup(i int, req LookupRequest) (res BatchResult, ok bool) {
	b := r.b
	sleep := b.Sleep
	if sleep == nil {
		sleep = throttle.SleepContext
	}
	res = BatchResult{Index: i, Request: req}
	// stopped ends a lookup the run stopped: interrupted when the caller's
	// ctx ended while it waited for the mirror, else not delivered.
	stopped := func() (BatchResult, bool) {
		if r.ctx.Err() == nil || res.Decision.Allowed || res.EndToEndID == "" {
			return res, false
		}
		res.Interrupted, res.Err = true, nil
		return res, true
	}
	var err error
	for {
		if r.stopCtx.Err() != nil {
			return stopped()
		}
		select {
		case r.senders <- struct{}{}:
		case <-r.stopCtx.Done():
			return stopped()
		}
		// A taken lookup completes whatever happens to the run; its
		// reservation ends with the run (decision 0124).
		res.Result, err = b.Client.GetEntry(withReserveStop(context.WithoutCancel(r.stopCtx), r.stopCtx), req)
		<-r.senders
		d := res.Decision
		if err != nil || d.Allowed || !b.Wait || d.RetryAfter <= 0 || (b.MaxWait > 0 && res.Waited+d.RetryAfter > b.MaxWait) {
			break // admitted, failed, or ends refused: res.Decision says why
		}
		if deadline, ok := r.stopCtx.Deadline(); ok && time.Until(deadline) < d.RetryAfter {
			break
		}
		r.progress(BatchEvent{Kind: BatchWaiting, Index: i, Request: req, Decision: d, Wait: d.RetryAfter})
		if sleep(r.stopCtx, d.RetryAfter) != nil {
			return stopped()
		}
		res.Waited += d.RetryAfter
	}
	switch {
	case errors.Is(err, context.Canceled) && r.stopCtx.Err() != nil:
		return stopped()
	case errors.Is(err, throttle.ErrStoreUnavailable) && !errors.Is(err, throttle.ErrOutcomeUnknown):
		r.stop(err)
		return res, false
	}
	// A commit whose answer was lost (throttle.ErrOutcomeUnknown) fails this lookup only.
	res.Err = err
	return res, true
}
