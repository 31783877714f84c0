package throttle

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
)

// BucketState is a bucket as a person or a monitor sees it at At: refilled,
// with its policy and the waits that apply. Reading a state never writes.
type BucketState struct {
	// Bucket is refilled to At. Bucket.Severity is the level last stored.
	Bucket
	Policy Policy
	At     time.Time
	// Stored is false for a key with no row: a full bucket.
	Stored bool
	// Orphan is set for a stored row whose policy the resolver no longer
	// knows; such a row is shown as stored, without refill.
	Orphan bool
	// Severity is the level at At (which refill may have improved).
	Severity Severity
	// CooldownLeft, BlockLeft and UntilFull are measured from At.
	CooldownLeft time.Duration
	BlockLeft    time.Duration
	UntilFull    time.Duration
	// RetryAfter is the wait until a request of cost 1 would be admitted.
	RetryAfter time.Duration
}

// state is b as seen at now under p. b must be p's bucket.
func (l *Limiter) state(b Bucket, p Policy, stored bool, now time.Time) BucketState {
	b.Refill(p, now)
	s := BucketState{
		Bucket: b, Policy: p, At: now, Stored: stored,
		Severity:     l.rules.thresholds.Grade(p, b, now, b.Severity),
		CooldownLeft: b.UntilCooldownEnds(p, now),
		BlockLeft:    b.UntilUnblocked(now),
		UntilFull:    b.UntilFull(p, now),
	}
	s.RetryAfter = max(b.UntilTokens(p, 1, now), s.CooldownLeft, s.BlockLeft)
	return s
}

// State returns key's bucket as of now. A key with no row is a full bucket.
//
// Errors: ErrInvalidKey, ErrUnknownPolicy, ErrStoreUnavailable.
func (l *Limiter) State(ctx context.Context, key Key) (BucketState, error) {
	states, err := l.States(ctx, []Key{key})
	if err != nil {
		return BucketState{}, err
	}
	return states[0], nil
}

// States returns the states of several keys at one instant, in the order
// given; keys with no row are full buckets.
func (l *Limiter) States(ctx context.Context, keys []Key) ([]BucketState, error) {
	policies := make([]Policy, len(keys))
	for i, k := range keys {
		p, err := l.Policy(k)
		if err != nil {
			return nil, err
		}
		policies[i] = p
	}
	rows, err := l.store.Buckets(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("throttle: states: %w", err)
	}
	byKey := make(map[Key]Bucket, len(rows))
	for _, b := range rows {
		byKey[b.Key] = b
	}
	now := l.clock()
	out := make([]BucketState, len(keys))
	for i, k := range keys {
		b, ok := byKey[k]
		if !ok {
			b = NewBucket(k, policies[i], now)
		}
		out[i] = l.state(b, policies[i], ok, now)
	}
	return out, l.recallLastSends(ctx, out)
}

// recallLastSends fills LastSentAt of the states whose row lost it: a reset
// during a cooldown clears the row's last send (the cooldown runs from it),
// but the bucket was sent on (SendCount > 0) and the ledger keeps the take.
// It reads one ledger row per such state (rare: only reset buckets); with
// no take left in the ledger (pruned, BALDE_LEDGER=none) the last send
// stays unknown. A take aggregated by minute gives the minute's start.
func (l *Limiter) recallLastSends(ctx context.Context, states []BucketState) error {
	for i := range states {
		s := &states[i]
		if !s.Stored || s.Orphan || !s.LastSentAt.IsZero() || s.SendCount == 0 {
			continue
		}
		k := s.Key
		takes, err := l.store.Ledger(ctx, LedgerQuery{Key: &k, Reasons: []LedgerReason{LedgerTake}, Limit: 1})
		if err != nil {
			return fmt.Errorf("throttle: last send of %s: %w", k, err)
		}
		if len(takes) > 0 {
			s.LastSentAt = takes[0].At
		}
	}
	return nil
}

// Page is one page of a bucket listing.
type Page struct {
	States []BucketState
	// Next is the cursor of the following page ("" on the last page); pass
	// it to DecodeCursor and then as Filter.After.
	Next string
	// Partial is set when a read-time filter (Filter.Severity, Condition)
	// read MaxScan rows without filling the page: Next resumes the scan.
	Partial bool
}

// List returns the stored buckets matching f, refilled to now, one page at a
// time (keyset pagination: the cost of a page does not grow with its depth).
func (l *Limiter) List(ctx context.Context, f Filter) (Page, error) {
	if f.Limit <= 0 || f.Limit > MaxPageSize {
		f.Limit = min(max(f.Limit, DefaultPageSize), MaxPageSize)
	}
	want := f.Limit
	if f.readTime() {
		return l.listMatching(ctx, f, want)
	}
	f.Limit++ // one more tells whether there is a next page
	rows, err := l.store.List(ctx, f)
	if err != nil {
		return Page{}, fmt.Errorf("throttle: list: %w", err)
	}
	var page Page
	if len(rows) > want {
		rows = rows[:want]
		page.Next = EncodeCursor(rows[want-1].Key)
	}
	now := l.clock()
	page.States = make([]BucketState, len(rows))
	for i, b := range rows {
		p, err := l.Policy(b.Key)
		if err != nil {
			// A row whose policy left the catalog is shown as stored.
			page.States[i] = BucketState{Bucket: b, At: now, Stored: true, Orphan: true, Severity: b.Severity}
			continue
		}
		page.States[i] = l.state(b, p, true, now)
	}
	return page, l.recallLastSends(ctx, page.States)
}

// Page sizes for List.
const (
	DefaultPageSize = 50
	MaxPageSize     = 1000
)

// EncodeCursor turns the last key of a page into an opaque URL-safe cursor.
func EncodeCursor(k Key) string {
	b, _ := json.Marshal([3]string{k.Policy, k.Env, k.Identifier})
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor is the inverse of EncodeCursor; "" decodes to the zero Key.
// The error wraps ErrInvalidKey.
func DecodeCursor(s string) (Key, error) {
	if s == "" {
		return Key{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	var parts [3]string
	if err == nil {
		err = json.Unmarshal(b, &parts)
	}
	if err != nil {
		return Key{}, fmt.Errorf("%w: bad cursor", ErrInvalidKey)
	}
	k := Key{Policy: parts[0], Env: parts[1], Identifier: parts[2]}
	return k, k.Validate()
}

// Ledger returns ledger entries matching q, newest first.
func (l *Limiter) Ledger(ctx context.Context, q LedgerQuery) ([]LedgerEntry, error) {
	if q.Limit <= 0 || q.Limit > MaxPageSize {
		q.Limit = min(max(q.Limit, DefaultPageSize), MaxPageSize)
	}
	entries, err := l.store.Ledger(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("throttle: ledger: %w", err)
	}
	return entries, nil
}

// LedgerWindow folds q.Key's ledger rows of the window q.From..q.To into
// q.Slots time slots, in the store (see Store.LedgerWindow): the answer
// is bounded by q.Slots whatever the ledger's volume. It returns an error
// wrapping ErrInvalidQuery for a query that fails Validate, ErrInvalidKey
// for an invalid key.
func (l *Limiter) LedgerWindow(ctx context.Context, q LedgerWindowQuery) (LedgerWindow, error) {
	if err := q.Validate(); err != nil {
		return LedgerWindow{}, err
	}
	if err := q.Key.Validate(); err != nil {
		return LedgerWindow{}, err
	}
	w, err := l.store.LedgerWindow(ctx, q)
	if err != nil {
		return LedgerWindow{}, fmt.Errorf("throttle: ledger window: %w", err)
	}
	return w, nil
}

// CountLedger counts ledger events matching q.
func (l *Limiter) CountLedger(ctx context.Context, q LedgerQuery) (int64, error) {
	n, err := l.store.CountLedger(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("throttle: count ledger: %w", err)
	}
	return n, nil
}

// CountBySeverity counts stored buckets matching f by stored severity (the
// level last alerted on); CountNow counts them by their level now.
func (l *Limiter) CountBySeverity(ctx context.Context, f Filter) (map[Severity]int64, error) {
	m, err := l.store.CountBySeverity(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("throttle: count buckets: %w", err)
	}
	return m, nil
}

// Now returns the limiter's clock reading.
func (l *Limiter) Now() time.Time { return l.clock() }
