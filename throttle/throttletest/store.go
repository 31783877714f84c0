package throttletest

import (
	"context"
	"reflect"
	"time"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
)

// FullStore is a store with both sides: what a throttle.Limiter decides on
// and what an inspect.Reader reads (sqlstore.Store, MemStore, Store).
type FullStore interface {
	throttle.Store
	inspect.Store
}

// Store is a throttle.Store whose methods can be replaced one by one: a nil
// function field falls through to Base, which must be set. Use it to inject failures, e.g.
//
//	s := &throttletest.Store{Base: mem, UpdateFn: func(...) error { return throttle.ErrStoreUnavailable }}
type Store struct {
	Base FullStore

	UpdateFn          func(ctx context.Context, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error) error
	BucketsFn         func(ctx context.Context, keys []throttle.Key) ([]throttle.Bucket, error)
	ListFn            func(ctx context.Context, f inspect.Filter) ([]throttle.Bucket, error)
	CountBySeverityFn func(ctx context.Context, f inspect.Filter) (map[throttle.Severity]int64, error)
	LedgerFn          func(ctx context.Context, q inspect.LedgerQuery) ([]throttle.LedgerEntry, error)
	CountLedgerFn     func(ctx context.Context, q inspect.LedgerQuery) (int64, error)
	LedgerWindowFn    func(ctx context.Context, q inspect.LedgerWindowQuery) (inspect.LedgerWindow, error)
	RowsFn            func(ctx context.Context, after throttle.Key, atLeast throttle.Severity, limit int) ([]throttle.Bucket, error)
	LastTakeFn        func(ctx context.Context, key throttle.Key) (time.Time, error)
	PruneLedgerFn     func(ctx context.Context, before time.Time, limit int) (int64, error)
}

var _ FullStore = (*Store)(nil)

// or returns fn, or base when fn is nil.
func or[F any](fn, base F) F {
	if reflect.ValueOf(fn).IsNil() {
		return base
	}
	return fn
}

func (s *Store) Update(ctx context.Context, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error) error {
	return or(s.UpdateFn, s.Base.Update)(ctx, keys, credits, apply)
}

func (s *Store) Buckets(ctx context.Context, keys []throttle.Key) ([]throttle.Bucket, error) {
	return or(s.BucketsFn, s.Base.Buckets)(ctx, keys)
}

func (s *Store) List(ctx context.Context, f inspect.Filter) ([]throttle.Bucket, error) {
	return or(s.ListFn, s.Base.List)(ctx, f)
}

func (s *Store) CountBySeverity(ctx context.Context, f inspect.Filter) (map[throttle.Severity]int64, error) {
	return or(s.CountBySeverityFn, s.Base.CountBySeverity)(ctx, f)
}

func (s *Store) Ledger(ctx context.Context, q inspect.LedgerQuery) ([]throttle.LedgerEntry, error) {
	return or(s.LedgerFn, s.Base.Ledger)(ctx, q)
}

func (s *Store) CountLedger(ctx context.Context, q inspect.LedgerQuery) (int64, error) {
	return or(s.CountLedgerFn, s.Base.CountLedger)(ctx, q)
}

func (s *Store) LedgerWindow(ctx context.Context, q inspect.LedgerWindowQuery) (inspect.LedgerWindow, error) {
	return or(s.LedgerWindowFn, s.Base.LedgerWindow)(ctx, q)
}

func (s *Store) PruneLedger(ctx context.Context, before time.Time, limit int) (int64, error) {
	return or(s.PruneLedgerFn, s.Base.PruneLedger)(ctx, before, limit)
}

// Rows calls RowsFn when set, else reads through List (so that ListFn
// also fails the engine's own reads).
func (s *Store) Rows(ctx context.Context, after throttle.Key, atLeast throttle.Severity, limit int) ([]throttle.Bucket, error) {
	if s.RowsFn != nil {
		return s.RowsFn(ctx, after, atLeast, limit)
	}
	return s.List(ctx, inspect.Filter{After: after, MinSeverity: atLeast, Limit: limit})
}

// LedgerSince reads through Ledger (so that LedgerFn also fails it).
func (s *Store) LedgerSince(ctx context.Context, key throttle.Key, since time.Time) (bool, error) {
	return inspect.LedgerSince(ctx, s, key, since)
}

// LastTake calls LastTakeFn when set, else reads through Ledger (so that
// LedgerFn also fails the engine's own reads).
func (s *Store) LastTake(ctx context.Context, key throttle.Key) (time.Time, error) {
	if s.LastTakeFn != nil {
		return s.LastTakeFn(ctx, key)
	}
	return inspect.LastTake(ctx, s, key)
}

// WithReads is decide (e.g. a throttle.GroupCommit) completed with the read
// side reads, usually the store below it.
func WithReads(decide throttle.Store, reads inspect.Store) FullStore {
	return withReads{decide, reads}
}

type (
	decideSide = throttle.Store
	readSide   = inspect.Store
)

type withReads struct {
	decideSide
	readSide
}
