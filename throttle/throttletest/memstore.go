package throttletest

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
)

// MemStore is a throttle.Store in memory, with the SQL store's semantics:
// Update is serialized (one transaction at a time), rolls back when apply
// fails, and aggregates take rows per bucket and minute. It is for tests of
// code above the engine that do not need a database.
type MemStore struct {
	// Now is the store's clock, read once per Update.
	Now throttle.Clock

	mu      sync.Mutex
	buckets map[throttle.Key]throttle.Bucket
	ledger  []throttle.LedgerEntry
	nextID  int64
}

var _ FullStore = (*MemStore)(nil)

// NewMemStore returns an empty store reading time from now.
func NewMemStore(now throttle.Clock) *MemStore {
	return &MemStore{Now: now, buckets: make(map[throttle.Key]throttle.Bucket)}
}

// Update implements throttle.Store.
func (s *MemStore) Update(ctx context.Context, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx := throttle.NewTx(s.Now())
	for _, k := range keys {
		if b, ok := s.buckets[k]; ok {
			tx.Load(cloneBucket(b))
		}
	}
	for _, c := range credits {
		if slices.ContainsFunc(s.ledger, func(e throttle.LedgerEntry) bool {
			return e.Key == c.Key && e.Reason == throttle.LedgerCredit && e.Ref == c.Ref
		}) {
			tx.LoadCredit(c)
		}
	}
	if err := apply(tx); err != nil {
		return err
	}
	for _, w := range tx.BucketWrites() {
		if w.Delete {
			delete(s.buckets, w.Bucket.Key)
		} else {
			s.buckets[w.Bucket.Key] = cloneBucket(w.Bucket)
		}
	}
	// An aggregated row adds to its bucket's row of the minute, or is new.
	rows, aggregated := tx.LedgerRows()
	for _, e := range aggregated {
		i := slices.IndexFunc(s.ledger, func(o throttle.LedgerEntry) bool {
			return o.Key == e.Key && o.Reason == throttle.LedgerTake && o.At.Equal(e.At)
		})
		if i < 0 {
			rows = append(rows, e)
			continue
		}
		s.ledger[i].Delta += e.Delta
		s.ledger[i].Count += e.Count
		s.ledger[i].Balance = e.Balance
	}
	for _, e := range rows {
		s.nextID++
		e.ID = s.nextID
		s.ledger = append(s.ledger, e)
	}
	return nil
}

func cloneBucket(b throttle.Bucket) throttle.Bucket {
	b.Spent = slices.Clone(b.Spent)
	return b
}

// Buckets implements throttle.Store.
func (s *MemStore) Buckets(ctx context.Context, keys []throttle.Key) ([]throttle.Bucket, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []throttle.Bucket
	for _, k := range keys {
		if b, ok := s.buckets[k]; ok {
			out = append(out, cloneBucket(b))
		}
	}
	return out, nil
}

func (s *MemStore) matching(f inspect.Filter) []throttle.Bucket {
	var out []throttle.Bucket
	for k, b := range s.buckets {
		if (f.Policy == "" || k.Policy == f.Policy) && (f.Env == "" || k.Env == f.Env) &&
			strings.HasPrefix(k.Identifier, f.IdentifierPrefix) &&
			!slices.Contains(f.ExcludePolicies, k.Policy) && b.Severity >= f.MinSeverity {
			out = append(out, cloneBucket(b))
		}
	}
	slices.SortFunc(out, func(a, b throttle.Bucket) int { return a.Key.Compare(b.Key) })
	return out
}

// List implements inspect.Store, in Key.Compare order.
func (s *MemStore) List(ctx context.Context, f inspect.Filter) ([]throttle.Bucket, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := slices.DeleteFunc(s.matching(f), func(b throttle.Bucket) bool {
		return f.After != (throttle.Key{}) && b.Key.Compare(f.After) <= 0
	})
	return firstN(all, f.Limit), nil
}

// firstN returns the first n of s, or all of s when n is not positive.
func firstN[E any](s []E, n int) []E {
	if n > 0 && len(s) > n {
		return s[:n]
	}
	return s
}

// CountBySeverity implements inspect.Store.
func (s *MemStore) CountBySeverity(ctx context.Context, f inspect.Filter) (map[throttle.Severity]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[throttle.Severity]int64)
	for _, b := range s.matching(f) {
		out[b.Severity]++
	}
	return out, nil
}

func (s *MemStore) ledgerMatching(q inspect.LedgerQuery) []throttle.LedgerEntry {
	return slices.DeleteFunc(slices.Clone(s.ledger), func(e throttle.LedgerEntry) bool {
		return q.Key != nil && e.Key != *q.Key ||
			q.Key == nil && q.Policy != "" && e.Key.Policy != q.Policy ||
			len(q.Reasons) > 0 && !slices.Contains(q.Reasons, e.Reason) ||
			!q.Since.IsZero() && e.At.Before(q.Since)
	})
}

// Ledger implements inspect.Store.
func (s *MemStore) Ledger(ctx context.Context, q inspect.LedgerQuery) ([]throttle.LedgerEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.DeleteFunc(s.ledgerMatching(q), func(e throttle.LedgerEntry) bool { return q.BeforeID != 0 && e.ID >= q.BeforeID })
	slices.SortFunc(out, func(a, b throttle.LedgerEntry) int { return cmp.Compare(b.ID, a.ID) })
	return firstN(out, q.Limit), nil
}

// CountLedger implements inspect.Store.
func (s *MemStore) CountLedger(ctx context.Context, q inspect.LedgerQuery) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, e := range s.ledgerMatching(q) {
		n += e.Count
	}
	return n, nil
}

// LedgerWindow implements inspect.Store with inspect.FoldLedger.
func (s *MemStore) LedgerWindow(ctx context.Context, q inspect.LedgerWindowQuery) (inspect.LedgerWindow, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return inspect.FoldLedger(s.ledgerMatching(inspect.LedgerQuery{Key: &q.Key}), q), nil
}

// PruneLedger implements throttle.Store.
func (s *MemStore) PruneLedger(ctx context.Context, before time.Time, limit int) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	s.ledger = slices.DeleteFunc(s.ledger, func(e throttle.LedgerEntry) bool {
		gone := n < int64(limit) && expired(e, before)
		if gone {
			n++
		}
		return gone
	})
	return n, nil
}

// expired reports whether a ledger row goes in a prune before before: by
// its own time, and a row of several refusals once its oldest may be older
// (see throttle.Store.PruneLedger).
func expired(e throttle.LedgerEntry, before time.Time) bool {
	if e.Count > 1 && slices.Contains(throttle.RefusalReasons, e.Reason) {
		return e.At.Before(before.Add(throttle.RefusalGroupSpan))
	}
	return e.At.Before(before)
}

// Rows implements throttle.Store, in Key.Compare order.
func (s *MemStore) Rows(ctx context.Context, after throttle.Key, atLeast throttle.Severity, limit int) ([]throttle.Bucket, error) {
	return s.List(ctx, inspect.Filter{After: after, MinSeverity: atLeast, Limit: limit})
}

// LedgerSince implements throttle.Store.
func (s *MemStore) LedgerSince(ctx context.Context, key throttle.Key, since time.Time) (bool, error) {
	return inspect.LedgerSince(ctx, s, key, since)
}

// LastTake implements throttle.Store.
func (s *MemStore) LastTake(ctx context.Context, key throttle.Key) (time.Time, error) {
	return inspect.LastTake(ctx, s, key)
}
