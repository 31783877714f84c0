// Package storebound bounds the time one request spends waiting on the
// store's writes, in all: the writes a request makes one after another (a
// web DICT lookup's inbound check, its reservation, the record of its
// outcome) share one bound, so that a request facing a stopped lock holder
// fails within the bound once instead of waiting it out once per write
// (docs/decisions/0190-one-store-deadline-per-request.md).
//
// The bound's time runs only while a write is in progress (the remote call
// between a reservation and its settlement is not counted), and when it is
// spent the request's context is cancelled with cause ErrSpent: the write
// in progress stops waiting (modernc.org/sqlite ends its busy wait, pgx
// cancels the statement) and every later one fails at once.
package storebound

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Request is the bound of one request: the 5 s of SQLite's busy_timeout
// and of PostgreSQL's lock_timeout, for the request as a whole.
const Request = 5 * time.Second

// ErrSpent is the cause of a request's context cancelled by its bound.
var ErrSpent = errors.New("the request waited its 5 s for the store")

type key struct{}

// bound is the time left to one request's store writes.
type bound struct {
	mu     sync.Mutex
	left   time.Duration
	active int       // writes in progress
	since  time.Time // when the first of them began
	timer  *time.Timer
	cancel context.CancelCauseFunc
}

// With returns ctx bounded to d of store writes in all, and the func that
// releases it (call it when the request ends). A ctx bounded already is
// returned as is: the outermost bound holds.
func With(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Value(key{}).(*bound); ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	b := &bound{left: d, cancel: cancel}
	return context.WithValue(ctx, key{}, b), func() {
		b.mu.Lock()
		if b.timer != nil {
			b.timer.Stop()
		}
		b.mu.Unlock()
		cancel(nil)
	}
}

// Enter begins a store write made with ctx and returns the func that ends
// it. While at least one write of ctx's request is in progress its bound's
// time runs; once spent, the request's context is cancelled with cause
// ErrSpent. On a ctx without a bound it does nothing.
func Enter(ctx context.Context) (exit func()) {
	b, ok := ctx.Value(key{}).(*bound)
	if !ok {
		return func() {}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.active == 0 {
		b.since = time.Now()
		b.timer = time.AfterFunc(max(b.left, 0), func() { b.cancel(ErrSpent) })
	}
	b.active++
	return sync.OnceFunc(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.active--; b.active == 0 {
			b.timer.Stop()
			b.left -= time.Since(b.since)
		}
	})
}

// Spent reports whether ctx's request was cancelled by its bound.
func Spent(ctx context.Context) bool { return errors.Is(context.Cause(ctx), ErrSpent) }
