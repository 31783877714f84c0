package throttle

import (
	"cmp"
	"slices"
	"time"
)

// The rules apply one operation each to the transaction's in-memory
// buckets. They are pure (time comes from tx.now), so many of them in one
// transaction give exactly what one transaction each would.

// priced is a Charge with its policy resolved and validated.
type priced struct {
	Charge
	policy Policy
}

// take admits all charges or none. A refusal whose refusing buckets all
// belong to policies in shadow mode (Config.Shadow) is an admission
// (Decision.Shadow) whose refusal rows are shadow rows: the buckets of the
// policies in shadow mode stay as the refusal leaves them, those of
// enforcing policies are charged, the request being sent
// (docs/decisions/0200).
func (tx *Tx) take(ref string, charges []priced, r rules) Decision {
	d := Decision{Allowed: true, Buckets: make([]BucketDecision, len(charges))}
	views := make([]*txBucket, len(charges))
	for i, c := range charges {
		views[i] = tx.bucket(c.Key, c.policy)
		d.Buckets[i] = views[i].b.evaluate(c, tx.now)
		if d.Buckets[i].Reason != ReasonNone {
			d.Shadow = true
			d.Allowed = d.Allowed && r.shadow(c.policy.Name)
		}
	}
	d.Shadow = d.Shadow && d.Allowed
	reasons := RefusalReasons
	if d.Shadow {
		reasons = ShadowReasons
	}
	for i, c := range charges {
		tb, bd := views[i], &d.Buckets[i]
		if bd.Reason == ReasonNone {
			continue
		}
		// A refusal for tokens or cooldown starts the policy's block.
		if c.policy.BlockFor > 0 && bd.Reason != ReasonBlocked {
			tb.b.BlockedUntil = tx.now.Add(c.policy.BlockFor)
			if c.policy.BlockFor >= bd.RetryAfter {
				bd.Reason, bd.RetryAfter = ReasonBlocked, c.policy.BlockFor
			}
			tx.touch(tb, c.policy, r.thresholds)
		}
		if r.recordRefusals {
			tx.record(tb, 0, reasons[bd.Reason-ReasonEmpty], ref)
		}
	}
	for i, c := range charges {
		tb, bd := views[i], &d.Buckets[i]
		if d.Allowed && !(d.Shadow && r.shadow(c.policy.Name)) {
			tb.b.spend(c.policy, c.Cost, tx.now)
			if c.HoldFor > 0 {
				tb.b.HeldUntil = tx.now.Add(c.HoldFor)
				bd.HeldUntil = tb.b.HeldUntil
			}
			// A pessimistic reservation: the remote side charges at its
			// answer, so until the settle the balance it sees is the one
			// before this take. Severity is graded without the hold; the
			// settle grades the balance left (decision 0100).
			bd.GradePending = tx.touchHeld(tb, c.policy, r.thresholds, c.held())
			tx.recordTake(tb, c.policy, -c.Cost, LedgerTake, ref)
		}
		bd.Remaining = tb.b.Tokens
		bd.ResetAfter = tb.b.UntilFull(c.policy, tx.now)
	}
	d = d.decided()
	if d.Shadow {
		d.Reason, d.RetryAfter = ReasonNone, 0
	}
	return d
}

// evaluate decides charge c on b, refilled to now: the wait is the longest
// of the token, cooldown and block waits, the exact earliest admission.
// Remaining and ResetAfter are left to the caller.
func (b *Bucket) evaluate(c priced, now time.Time) BucketDecision {
	p := c.policy
	bd := BucketDecision{Key: b.Key, Policy: p, Cost: c.Cost}
	wait, reason := b.untilTokens(p, c.need(), now), ReasonEmpty
	if w := b.untilCooldownEnds(p, now); w > 0 && w >= wait {
		wait, reason = w, ReasonCooldown
	}
	if w := b.untilUnblocked(now); w > 0 && w >= wait {
		wait, reason = w, ReasonBlocked
	}
	if wait > 0 {
		bd.Reason, bd.RetryAfter = reason, wait
	}
	return bd
}

// decided returns d with its summary fields filled from its bucket
// decisions: when allowed, the bucket with the fewest tokens left (then the
// smallest capacity); when refused, the one with the longest wait; the
// first of equals.
func (d Decision) decided() Decision {
	if len(d.Buckets) == 0 {
		return d
	}
	var b BucketDecision
	if d.Allowed {
		b = slices.MinFunc(d.Buckets, func(x, y BucketDecision) int {
			return cmp.Or(cmp.Compare(x.Remaining, y.Remaining), cmp.Compare(x.Policy.Capacity, y.Policy.Capacity))
		})
	} else {
		b = slices.MaxFunc(d.Buckets, func(x, y BucketDecision) int { return cmp.Compare(x.RetryAfter, y.RetryAfter) })
	}
	d.Key, d.Reason, d.Limit = b.Key, b.Reason, b.Policy.Capacity
	d.Remaining, d.RetryAfter, d.ResetAfter = b.Remaining, b.RetryAfter, b.ResetAfter
	return d
}

// adjust applies one penalty, refund or credit.
func (tx *Tx) adjust(a Adjustment, p Policy, r rules) Adjusted {
	tb := tx.bucket(a.Key, p)
	if a.Reason == LedgerCredit {
		ref := CreditRef{Key: a.Key, Ref: a.Ref}
		if tx.credited[ref] {
			return Adjusted{Key: a.Key, Balance: tb.b.Tokens, Duplicate: true}
		}
		tx.LoadCredit(ref)
	}
	applied := tb.b.add(p, a.Delta, tx.now)
	if applied != 0 || a.Delta == 0 {
		// A refund of 0 is a hold settled at its full cost: nothing comes
		// back, and the balance the hold left is graded now.
		tx.touch(tb, p, r.thresholds)
	}
	// A credit is recorded even when the bucket was full, so that the
	// reference stays used.
	if applied != 0 || a.Reason == LedgerCredit {
		tx.record(tb, applied, a.Reason, a.Ref)
	}
	return Adjusted{Key: a.Key, Applied: applied, Balance: tb.b.Tokens}
}

// sync lowers a bucket to the remote side's state; it never raises it.
func (tx *Tx) sync(t SyncTarget, p Policy, r rules) Adjusted {
	tb := tx.bucket(t.Key, p)
	var applied int64
	changed := false
	if tb.b.Tokens > t.Tokens {
		applied = tb.b.add(p, t.Tokens-tb.b.Tokens, tx.now)
		changed = true
	}
	if !t.Hold.IsZero() && tb.b.HeldUntil.Equal(t.Hold) {
		tb.b.HeldUntil = time.Time{}
		changed = true
	}
	if t.Cooldown > 0 {
		tb.b.NextAt = later(tb.b.NextAt, tx.now.Add(t.Cooldown))
		changed = true
	}
	out := Adjusted{Key: t.Key}
	block := t.BlockFor
	if t.Escalate && block > 0 {
		b := &tb.b
		if b.BlockLevel > 0 && !b.BlockedUntil.IsZero() && t.Memory > 0 && tx.now.Sub(b.BlockedUntil) >= t.Memory {
			b.BlockLevel = 0
		}
		b.BlockLevel++
		block = escalated(t.BlockFor, b.BlockLevel, t.BlockMax)
		out.BlockLevel, out.BlockedFor = b.BlockLevel, block
		changed = true
	}
	if block > 0 {
		if until := tx.now.Add(block); until.After(tb.b.BlockedUntil) {
			tb.b.BlockedUntil = until
			changed = true
		}
	}
	if changed {
		tx.touch(tb, p, r.thresholds)
		tx.record(tb, applied, LedgerSync, t.Ref)
	}
	out.Applied, out.Balance = applied, tb.b.Tokens
	return out
}

// escalated is the block of the level-th escalating block in a row: step ×
// level, at most limit (when > 0).
func escalated(step time.Duration, level int64, limit time.Duration) time.Duration {
	d := step * time.Duration(level)
	if d/time.Duration(level) != step || d < 0 { // overflow
		d = maxDuration
	}
	if limit > 0 && d > limit {
		d = max(limit, step)
	}
	return d
}

// reset fills a bucket and clears its cooldown and block (an operator's
// action); actor is recorded as the ledger reference. BlockLevel stays: it
// is the remote side's history, which a local reset does not change; so
// does a hold: its request is on the wire.
func (tx *Tx) reset(key Key, p Policy, actor string, r rules) Bucket {
	tb := tx.bucket(key, p)
	b, before := &tb.b, tb.b.Tokens
	// The last send is history, kept unless clearing the cooldown needs
	// it gone (the cooldown runs from it).
	if b.untilCooldownEnds(p, tx.now) > 0 {
		b.LastSentAt = time.Time{}
	}
	b.Tokens, b.Carry, b.Spent = p.Capacity, 0, nil
	b.RefilledAt = later(b.RefilledAt, tx.now)
	b.BlockedUntil, b.NextAt = time.Time{}, time.Time{}
	tx.touch(tb, p, r.thresholds)
	tx.record(tb, b.Tokens-before, LedgerReset, actor)
	return *b
}

// recordRefusals writes groups of refusals answered from memory, one
// ledger row each: Count refusals of one key and reason, stamped with the
// newest one's time and the balance it saw. Such a row may come after rows
// of later instants; Store.PruneLedger removes it by its own time.
func (tx *Tx) recordRefusals(due []refusalCount) {
	for _, r := range due {
		tb := tx.bucket(r.key, r.policy)
		tb.dirty, tb.delete = true, false
		tx.ledger = append(tx.ledger, LedgerEntry{
			Key: r.key, At: r.last, Balance: r.balance,
			Reason: RefusalReasons[r.reason-ReasonEmpty], Count: r.n,
		})
	}
}

// collect deletes a stored bucket that is equivalent to no row (full, no
// cooldown or block pending) and reports whether it did.
func (tx *Tx) collect(key Key, p Policy) bool {
	tb, ok := tx.buckets[key]
	if !ok || !tb.stored {
		return false
	}
	tb.b.Refill(p, tx.now)
	if !tb.b.isIdle(p, tx.now) {
		return false
	}
	tb.dirty, tb.delete = true, true
	return true
}

// rules are the limiter's settings the operations need.
type rules struct {
	thresholds     Thresholds
	recordRefusals bool
	shadow         func(policy string) bool // never nil
}
