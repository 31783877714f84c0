package throttle

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// GroupCommitOptions tune a GroupCommit. The zero value is usable.
type GroupCommitOptions struct {
	// MaxBatch bounds the operations applied in one transaction. Default 256.
	MaxBatch int
	// MaxWait is the longest a batch waits for more operations, only while
	// it is smaller than the batch before it (the callers answered by that
	// one come back a few microseconds later; a lone caller never waits).
	// Default DefaultMaxWait; negative never waits.
	MaxWait time.Duration
	// Writers is the number of transactions run at once. Default 1, right
	// for SQLite (one writer per database). On PostgreSQL a few writers
	// overlap round trips.
	Writers int
}

// GroupCommit is a Store that funnels the Updates of one process into
// batches, each applied in one transaction of the underlying store. The
// operations of a batch run in arrival order on one Tx, each seeing the
// effects of the ones before it: the results are exactly those of one
// transaction each at the batch's instant.
//
// Reads go straight to the underlying store. Close stops the writers.
type GroupCommit struct {
	Store
	opts    GroupCommitOptions
	batches atomic.Int64
	ops     atomic.Int64
	queue   chan *groupOp
	done    chan struct{}
	closed  sync.Once
	wg      sync.WaitGroup
}

type groupOp struct {
	ctx     context.Context
	keys    []Key
	credits []CreditRef
	apply   func(*Tx) error
	result  chan error
}

// defaultMaxWait is GroupCommitOptions.MaxWait's default.
const defaultMaxWait = 100 * time.Microsecond

// NewGroupCommit starts the writers of a GroupCommit over store.
func NewGroupCommit(store Store, opts GroupCommitOptions) *GroupCommit {
	opts.MaxBatch, opts.Writers = cmp.Or(max(opts.MaxBatch, 0), 256), cmp.Or(max(opts.Writers, 0), 1)
	opts.MaxWait = cmp.Or(opts.MaxWait, defaultMaxWait)
	g := &GroupCommit{
		Store: store,
		opts:  opts,
		queue: make(chan *groupOp, opts.MaxBatch*opts.Writers),
		done:  make(chan struct{}),
	}
	for range opts.Writers {
		g.wg.Go(g.write)
	}
	return g
}

var _ Store = (*GroupCommit)(nil)

// Update queues the operation for the next batch and waits for its
// transaction. A queued operation is applied even if ctx ends meanwhile
// while another of its batch still has a caller waiting; one whose ctx
// ended before its batch started is dropped with ctx's error. When every
// ctx of a batch has ended the transaction is cancelled and each operation
// gets its ctx's error, or, if the COMMIT was in flight, the store's error
// wrapping ErrOutcomeUnknown (decision 0124).
func (g *GroupCommit) Update(ctx context.Context, keys []Key, credits []CreditRef, apply func(*Tx) error) error {
	op := &groupOp{ctx: ctx, keys: keys, credits: credits, apply: apply, result: make(chan error, 1)}
	select {
	case g.queue <- op:
	case <-ctx.Done():
		return ctx.Err()
	case <-g.done:
		return errClosed
	}
	return <-op.result
}

// Stats returns how many transactions the writers ran and how many
// operations they carried: ops/batches is the mean batch size.
func (g *GroupCommit) Stats() (batches, ops int64) { return g.batches.Load(), g.ops.Load() }

// Queued returns how many operations wait for a writer.
func (g *GroupCommit) Queued() int { return len(g.queue) }

// Close stops the writers after the batches in flight; queued operations
// not yet started get ErrClosed.
func (g *GroupCommit) Close() error {
	g.closed.Do(func() { close(g.done) })
	g.wg.Wait()
	for {
		select {
		case op := <-g.queue:
			op.result <- errClosed
		default:
			return nil
		}
	}
}

// write is one writer: it takes a batch from the queue and commits it.
func (g *GroupCommit) write() {
	batch := make([]*groupOp, 0, g.opts.MaxBatch)
	previous := 0
	for {
		batch = batch[:0]
		select {
		case op := <-g.queue:
			batch = append(batch, op)
		case <-g.done:
			return
		}
		batch = g.fill(batch, previous)
		previous = len(batch)
		g.commit(batch)
	}
}

// fill adds what is already queued, then, while the batch is smaller than
// the previous one, waits up to MaxWait for the callers it answered.
func (g *GroupCommit) fill(batch []*groupOp, previous int) []*groupOp {
	var timeout <-chan time.Time
	for len(batch) < g.opts.MaxBatch {
		select {
		case op := <-g.queue:
			batch = append(batch, op)
			continue
		default:
		}
		if g.opts.MaxWait < 0 || len(batch) >= previous {
			return batch
		}
		if timeout == nil {
			t := time.NewTimer(g.opts.MaxWait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case op := <-g.queue:
			batch = append(batch, op)
		case <-timeout:
			return batch
		}
	}
	return batch
}

// commit applies a batch in one transaction and answers each operation. An
// operation whose apply fails is answered with its error and the batch is
// run again without it, so that its partial effects are not committed.
func (g *GroupCommit) commit(batch []*groupOp) {
	live := batch[:0:0]
	for _, op := range batch {
		if err := op.ctx.Err(); err != nil {
			op.result <- err
			continue
		}
		live = append(live, op)
	}
	for len(live) > 0 {
		g.batches.Add(1)
		g.ops.Add(int64(len(live)))
		var keys []Key
		var credits []CreditRef
		for _, op := range live {
			keys = append(keys, op.keys...)
			credits = append(credits, op.credits...)
		}
		errs := make([]error, len(live))
		failed := -1
		ctx, stop := batchContext(live)
		err := g.Store.Update(ctx, keys, credits, func(tx *Tx) error {
			failed = -1 // the store may run this again on a fresh Tx
			for i, op := range live {
				if errs[i] = op.apply(tx); errs[i] != nil {
					failed = i
					return errs[i]
				}
			}
			return nil
		})
		cancelled := stop()
		if err != nil && cancelled && !errors.Is(err, ErrOutcomeUnknown) {
			// Every caller is gone and the store says nothing was applied:
			// each gets its own ctx's error.
			for _, op := range live {
				op.result <- op.ctx.Err()
			}
			return
		}
		if err != nil && failed >= 0 {
			live[failed].result <- errs[failed]
			live = slices.Delete(live, failed, failed+1)
			continue
		}
		for _, op := range live {
			op.result <- err
		}
		return
	}
}

// batchContext returns the context of a batch's transaction: it is
// cancelled once the ctx of every operation in live has ended, and never
// while one of them still has a caller waiting. stop releases it and
// reports whether it was cancelled, which implies every op's ctx ended.
// A batch holding an operation whose ctx never ends runs on
// context.Background.
func batchContext(live []*groupOp) (ctx context.Context, stop func() (cancelled bool)) {
	for _, op := range live {
		if op.ctx.Done() == nil {
			return context.Background(), func() bool { return false }
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var waiting atomic.Int64
	waiting.Store(int64(len(live)))
	stops := make([]func() bool, len(live))
	for i, op := range live {
		stops[i] = context.AfterFunc(op.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() bool {
		for _, s := range stops {
			s()
		}
		cancelled := ctx.Err() != nil
		cancel()
		return cancelled
	}
}
