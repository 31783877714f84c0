// Package throttle is balde's engine: token buckets kept in a SQL store and
// decided in one transaction each, so that several processes sharing a
// database stay exact.
//
// The vocabulary:
//
//   - A Policy describes a kind of bucket (capacity, refill, cooldown,
//     block, fail mode). A Key names one bucket: (policy, env, identifier).
//   - Limiter.Take charges one or more keys at once, all or nothing, and
//     answers a Decision. A refusal is a Decision with Allowed == false, a
//     Reason (empty, cooldown, blocked) and the exact RetryAfter.
//   - Limiter.Adjust applies what the outcome of a request costs or earns
//     (a penalty, a refund, a credit), Limiter.Sync lowers the mirror to the
//     remote side's state, Limiter.Reset is an operator filling a bucket.
//   - Every change of tokens is a LedgerEntry with a reason and a reference.
//
// Units: tokens are whole int64 tokens; time is time.Time and
// time.Duration, stored as integer nanoseconds. Refill is lazy (computed when
// a bucket is read, nothing runs on a timer) and exact: under continuous
// refill the fraction of the next token is carried in Bucket.Carry, never
// rounded away. A clock that steps backwards never creates tokens.
//
// The rules are pure functions over a Tx, the in-memory view of one store
// transaction; a Store only locks, loads and writes rows. That split lets a
// store apply many decisions in one transaction with the same results as one
// transaction each.
package throttle

import (
	"context"
	"time"
)

// Store keeps buckets and the ledger. Implementations: sqlstore (SQLite and
// PostgreSQL). All methods are safe for concurrent use, also from several
// processes on one database.
//
// Errors: a Store wraps ErrStoreUnavailable around every failure to reach or
// use the database; ErrInvalidKey for a key it cannot store.
type Store interface {
	// Update runs one write transaction: it locks the buckets of keys (in
	// Key.Compare order), reads its clock once, builds a Tx with NewTx from
	// the rows that exist and the credits already applied, and calls apply;
	// when apply returns nil it writes tx.BucketWrites and tx.LedgerRows
	// and commits, otherwise it rolls back and returns apply's error
	// unchanged. apply may run more than once (a transaction that lost a
	// race is retried): it must depend only on its Tx.
	Update(ctx context.Context, keys []Key, credits []CreditRef, apply func(*Tx) error) error

	// Buckets returns the stored rows of keys that have one, in no
	// particular order. It does not lock and does not write.
	Buckets(ctx context.Context, keys []Key) ([]Bucket, error)

	// Rows returns up to limit stored rows whose key comes after after in
	// the store's key order (the zero Key: from the first) and whose stored
	// severity is at least atLeast (SeverityUnknown: every row), in that
	// order. It does not lock and does not write. Reevaluate and Prune page
	// through the buckets with it.
	Rows(ctx context.Context, after Key, atLeast Severity, limit int) ([]Bucket, error)

	// LastTake returns the time of key's newest take in the ledger (the
	// start of its minute for an aggregated row), or the zero time when the
	// ledger keeps none. It does not lock and does not write.
	LastTake(ctx context.Context, key Key) (time.Time, error)

	// LedgerSince reports whether key has a ledger row at or after since
	// (Prune keeps a bucket row while it does: its ledger is read through
	// the row). It does not lock and does not write.
	LedgerSince(ctx context.Context, key Key, since time.Time) (bool, error)

	// PruneLedger deletes up to limit ledger rows older than before, oldest
	// first, and returns how many it deleted; callers loop until it returns
	// fewer than limit. A refusal row goes by its own time wherever it lies
	// (one of several refusals once At is before before+RefusalGroupSpan);
	// other rows written out of time order may wait for the rows before
	// them.
	PruneLedger(ctx context.Context, before time.Time, limit int) (int64, error)
}
