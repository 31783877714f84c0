package sqlstore

import (
	"context"
	"time"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
)

// retried is withRetry for a read that returns a value (running a read
// twice is harmless): every read of throttle.Store and inspect.Store, and
// PruneLedger, goes through it.
func retried[T any](ctx context.Context, s *Store, op string, read func() (T, error)) (v T, err error) {
	err = s.withRetry(ctx, op, func() error { v, err = read(); return err })
	return v, err
}

// Rows implements throttle.Store with List.
func (s *Store) Rows(ctx context.Context, after throttle.Key, atLeast throttle.Severity, limit int) ([]throttle.Bucket, error) {
	return s.List(ctx, inspect.Filter{After: after, MinSeverity: atLeast, Limit: limit})
}

// LedgerSince implements throttle.Store with Ledger.
func (s *Store) LedgerSince(ctx context.Context, key throttle.Key, since time.Time) (bool, error) {
	return inspect.LedgerSince(ctx, s, key, since)
}

// LastTake implements throttle.Store with Ledger.
func (s *Store) LastTake(ctx context.Context, key throttle.Key) (time.Time, error) {
	return inspect.LastTake(ctx, s, key)
}
