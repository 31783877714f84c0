package throttle

import (
	"context"
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
	// Shadow: the policy is in shadow mode (Config.Shadow).
	Shadow bool
}

// state is b as seen at now under p. b must be p's bucket.
func (l *Limiter) state(b Bucket, p Policy, stored bool, now time.Time) BucketState {
	b.Refill(p, now)
	s := BucketState{
		Bucket: b, Policy: p, At: now, Stored: stored,
		Severity:     l.rules.thresholds.grade(p, b, now, b.Severity),
		CooldownLeft: b.untilCooldownEnds(p, now),
		BlockLeft:    b.untilUnblocked(now),
		UntilFull:    b.UntilFull(p, now),
	}
	s.RetryAfter = max(b.untilTokens(p, 1, now), s.CooldownLeft, s.BlockLeft)
	s.Shadow = l.rules.shadow(p.Name)
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
	out := make([]BucketState, len(keys))
	for i, k := range keys {
		p, err := l.Policy(k)
		if err != nil {
			return nil, err
		}
		out[i].Policy = p
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
	for i, k := range keys {
		b, ok := byKey[k]
		if !ok {
			b = newBucket(k, out[i].Policy, now)
		}
		out[i] = l.state(b, out[i].Policy, ok, now)
	}
	return out, l.RecallLastSends(ctx, out)
}

// RecallLastSends fills LastSentAt of the states whose row lost it (a
// reset during a cooldown) but that were sent on, from the ledger's last
// take (a minute's start for an aggregated one), one read per such state;
// it stays unknown when no take is left in the ledger.
func (l *Limiter) RecallLastSends(ctx context.Context, states []BucketState) error {
	for i := range states {
		s := &states[i]
		if !s.Stored || s.Orphan || !s.LastSentAt.IsZero() || s.SendCount == 0 {
			continue
		}
		at, err := l.store.LastTake(ctx, s.Key)
		if err != nil {
			return fmt.Errorf("throttle: last send of %s: %w", s.Key, err)
		}
		s.LastSentAt = at
	}
	return nil
}

// Now returns the limiter's clock reading.
func (l *Limiter) Now() time.Time { return l.clock() }
