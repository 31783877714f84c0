// Package inspect is balde's read model: what a person or a monitor asks of
// the buckets and the ledger (lists, counts, chart windows), as opposed to
// what a decision needs (package throttle). A Reader reads through a Store
// and sees every bucket as its throttle.Limiter does: refilled to its clock,
// graded under its policies. Reading never writes.
package inspect

import (
	"context"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// Store is the read side of a bucket store (sqlstore, throttletest.MemStore).
// Its methods are safe for concurrent use, neither lock nor write, and wrap
// throttle.ErrStoreUnavailable around every failure of the database.
type Store interface {
	// List returns up to f.Limit stored rows matching f, in the store's key
	// order (throttle.Key.Compare), starting after f.After.
	List(ctx context.Context, f Filter) ([]throttle.Bucket, error)

	// CountBySeverity counts the stored rows matching f (After and Limit
	// ignored) by their stored severity.
	CountBySeverity(ctx context.Context, f Filter) (map[throttle.Severity]int64, error)

	// Ledger returns up to q.Limit ledger entries matching q, newest first.
	Ledger(ctx context.Context, q LedgerQuery) ([]throttle.LedgerEntry, error)

	// CountLedger counts the ledger rows matching q (BeforeID and Limit
	// ignored), summing Count for aggregated rows.
	CountLedger(ctx context.Context, q LedgerQuery) (int64, error)

	// LedgerWindow folds q.Key's ledger rows of q.From..q.To into at most
	// q.Slots slots as FoldLedger does, reading at most MaxWindowRows rows
	// (Partial past it). q has been validated.
	LedgerWindow(ctx context.Context, q LedgerWindowQuery) (LedgerWindow, error)
}

// Filter selects buckets for listing. Empty fields match everything.
type Filter struct {
	Policy           string
	Env              string
	IdentifierPrefix string
	// After is the keyset cursor: keys strictly after it (zero: from the start).
	After throttle.Key
	// Limit bounds the rows returned (a store may cap it).
	Limit int
	// ExcludePolicies leaves out those policies' buckets; MinSeverity keeps
	// rows stored at least that bad (SeverityUnknown: all).
	ExcludePolicies []string
	MinSeverity     throttle.Severity
	// Severity (the level now) and Condition are applied by the Reader at
	// read time; a store ignores them.
	Severity  throttle.Severity
	Condition throttle.Condition
}

// LedgerQuery selects ledger entries. Empty fields match everything.
type LedgerQuery struct {
	// Key, when not nil, restricts to one bucket.
	Key *throttle.Key
	// Policy restricts to one policy (ignored when Key is set).
	Policy  string
	Reasons []throttle.LedgerReason
	// Since keeps entries at or after it.
	Since time.Time
	// BeforeID is the keyset cursor: entries with ID < BeforeID (0: all).
	BeforeID int64
	Limit    int
}

// Reader answers the read model's questions about the buckets a Limiter
// decides on. It is safe for concurrent use.
type Reader struct {
	lim   *throttle.Limiter
	store Store
}

// New returns a Reader of store, the store lim decides on (or its read
// side), seeing buckets as lim does: its clock, policies and grading.
func New(lim *throttle.Limiter, store Store) *Reader {
	return &Reader{lim: lim, store: store}
}

// LedgerSince is throttle.Store.LedgerSince answered by a Store's ledger.
func LedgerSince(ctx context.Context, s Store, key throttle.Key, since time.Time) (bool, error) {
	rows, err := s.Ledger(ctx, LedgerQuery{Key: &key, Since: since, Limit: 1})
	return len(rows) > 0, err
}

// LastTake is throttle.Store.LastTake answered by a Store's ledger: the
// time of key's newest take row, zero when none.
func LastTake(ctx context.Context, s Store, key throttle.Key) (time.Time, error) {
	takes, err := s.Ledger(ctx, LedgerQuery{Key: &key, Reasons: []throttle.LedgerReason{throttle.LedgerTake}, Limit: 1})
	if err != nil || len(takes) == 0 {
		return time.Time{}, err
	}
	return takes[0].At, nil
}
