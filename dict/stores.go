package dict

import (
	"context"
	"time"
)

// Records stores the lookups the DICT answered, keyed by EndToEndId, so that
// a payment can be credited to their buckets, and the participant's category,
// so that a restart reuses it while fresh. dictsql.Records implements it.
type Records interface {
	// RecordLookup stores l, replacing an earlier lookup with the same
	// EndToEndId (keeping its payment, if any).
	RecordLookup(ctx context.Context, l Lookup) error
	// FindLookup returns the lookup of e2e, or an error wrapping
	// ErrUnknownEndToEndID.
	FindLookup(ctx context.Context, e2e string) (Lookup, error)
	// MarkPaid records that the lookup e2e was paid at, unless it already was.
	MarkPaid(ctx context.Context, e2e string, at time.Time) error
	// LearnedCategory returns the category recorded for participant in env
	// and when it was learned; ok is false when none was.
	LearnedCategory(ctx context.Context, env, participant string) (category string, at time.Time, ok bool, err error)
	// SaveCategory records participant's category in env, learned at.
	SaveCategory(ctx context.Context, env, participant, category string, at time.Time) error
}
