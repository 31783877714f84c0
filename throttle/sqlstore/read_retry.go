package sqlstore

import (
	"context"
	"time"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
)

// The reads of throttle.Store and inspect.Store, each run again after a transient error
// (withRetry: a broken or terminated connection, SQLITE_BUSY past the busy
// timeout), with backoff, within about 4.5 s. A read changes nothing, so
// running it twice is harmless.

// Buckets implements throttle.Store (see buckets).
func (s *Store) Buckets(ctx context.Context, keys []throttle.Key) (bs []throttle.Bucket, err error) {
	err = s.withRetry(ctx, "buckets", func() error { bs, err = s.buckets(ctx, keys); return err })
	return bs, err
}

// List implements inspect.Store (see list).
func (s *Store) List(ctx context.Context, f inspect.Filter) (bs []throttle.Bucket, err error) {
	err = s.withRetry(ctx, "list", func() error { bs, err = s.list(ctx, f); return err })
	return bs, err
}

// CountBySeverity implements inspect.Store (see countBySeverity).
func (s *Store) CountBySeverity(ctx context.Context, f inspect.Filter) (m map[throttle.Severity]int64, err error) {
	err = s.withRetry(ctx, "count by severity", func() error { m, err = s.countBySeverity(ctx, f); return err })
	return m, err
}

// Ledger implements inspect.Store (see ledger).
func (s *Store) Ledger(ctx context.Context, q inspect.LedgerQuery) (es []throttle.LedgerEntry, err error) {
	err = s.withRetry(ctx, "ledger", func() error { es, err = s.ledger(ctx, q); return err })
	return es, err
}

// CountLedger implements inspect.Store (see countLedger).
func (s *Store) CountLedger(ctx context.Context, q inspect.LedgerQuery) (n int64, err error) {
	err = s.withRetry(ctx, "count ledger", func() error { n, err = s.countLedger(ctx, q); return err })
	return n, err
}

// LedgerWindow implements inspect.Store (see ledgerWindow).
func (s *Store) LedgerWindow(ctx context.Context, q inspect.LedgerWindowQuery) (w inspect.LedgerWindow, err error) {
	err = s.withRetry(ctx, "ledger window", func() error { w, err = s.ledgerWindow(ctx, q); return err })
	return w, err
}

// PruneLedger implements inspect.Store (see pruneLedger). A retried prune
// whose first try committed unseen deletes a further run of rows that are
// all older than before: as the caller asked, only the count it reports
// misses the first run.
func (s *Store) PruneLedger(ctx context.Context, before time.Time, limit int) (n int64, err error) {
	err = s.withRetry(ctx, "prune ledger", func() error { n, err = s.pruneLedger(ctx, before, limit); return err })
	return n, err
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
