package throttle

import (
	"math/bits"
	"slices"
	"time"
)

// Bucket is the stored state of one key, and the pure arithmetic on it. All
// arithmetic is on integers (nanoseconds and whole tokens); nothing stored is
// a float. The zero time.Time means "never".
//
// Methods that take a Policy require p to be the policy the bucket's key
// resolves to; methods that take now never move a timestamp backwards, so a
// clock that steps back never creates tokens.
type Bucket struct {
	Key Key
	// Tokens is the balance in whole tokens as of RefilledAt. It is at most
	// the policy's capacity and may be negative after a penalty.
	Tokens int64
	// Carry is, under RefillContinuous, the part of the next token already
	// accrued at RefilledAt, in units of 1/RefillPeriod.Nanoseconds() of a
	// token: 0 <= Carry < RefillPeriod.Nanoseconds(). It is 0 otherwise.
	Carry int64
	// RefilledAt is the instant Tokens and Carry describe.
	RefilledAt time.Time
	// Spent lists, under RefillRolling, the tokens still out and when they
	// were spent, oldest first; each comes back RefillPeriod after its At.
	Spent []Spend
	// LastSentAt is when the last request was admitted (the cooldown counts
	// from it); SendCount counts admitted requests.
	LastSentAt time.Time
	SendCount  int64
	// BlockedUntil is the end of a block that started with a refusal (or
	// that a Sync set).
	BlockedUntil time.Time
	// NextAt is a cooldown the caller set (a Sync with Cooldown), beside the
	// policy's MinInterval: the key admits nothing before it
	// (ReasonCooldown).
	NextAt time.Time
	// HeldUntil is set by an admitted Charge with HoldFor: the key admits
	// nothing until the Sync of its answer clears it (SyncTarget.Hold), or
	// until HeldUntil. A refusal while held waits one MinInterval, or until
	// the hold's end when that comes sooner.
	HeldUntil time.Time
	// BlockLevel counts the escalating blocks in a row (SyncTarget.Escalate):
	// the next one lasts one step longer.
	BlockLevel int64
	// Severity is the level last stored for this bucket (SeverityUnknown for
	// a bucket never written).
	Severity Severity
}

// Spend is a group of tokens spent at one instant under RefillRolling.
type Spend struct {
	At time.Time
	N  int64
}

// newBucket returns the state of a key that has no row: a full bucket.
func newBucket(key Key, p Policy, now time.Time) Bucket {
	return Bucket{Key: key, Tokens: p.Capacity, RefilledAt: now}
}

// Refill brings b up to now under p: it adds the tokens accrued since
// RefilledAt, never beyond capacity. A bucket that is (or becomes) full
// forgets its carry, because tokens arriving at a full bucket are discarded.
// If now is before RefilledAt nothing changes.
func (b *Bucket) Refill(p Policy, now time.Time) {
	if !now.After(b.RefilledAt) {
		return
	}
	if p.Refill == RefillRolling {
		i := 0
		for i < len(b.Spent) && !b.Spent[i].At.Add(p.RefillPeriod).After(now) {
			i++
		}
		b.Spent = slices.Delete(b.Spent, 0, i)
		b.recount(p)
		b.RefilledAt = now
		return
	}
	if b.Tokens < p.Capacity && !b.accrue(p, now) {
		return
	}
	b.Tokens, b.Carry, b.RefilledAt = p.Capacity, 0, now
}

// accrue adds to a bucket below capacity the tokens accrued from RefilledAt
// to now, or reports that they fill it (and changes nothing).
func (b *Bucket) accrue(p Policy, now time.Time) (full bool) {
	elapsed := uint64(now.Sub(b.RefilledAt))
	missing := uint64(p.Capacity - b.Tokens)
	period, rate := uint64(p.RefillPeriod), uint64(p.RefillTokens)
	if p.Refill == RefillStepwise {
		steps := elapsed / period
		// steps*rate >= missing, written so it cannot overflow.
		if steps >= (missing+rate-1)/rate {
			return true
		}
		b.Tokens += int64(steps * rate)
		b.RefilledAt = b.RefilledAt.Add(time.Duration(steps * period))
		return false
	}
	// Continuous: accrued = Carry + elapsed*rate, in 1/period-of-a-token
	// units; the bucket fills once accrued >= missing*period. 128-bit
	// products, so a bucket idle for years or deep in debt cannot overflow.
	accHi, accLo := bits.Mul64(elapsed, rate)
	var c uint64
	accLo, c = bits.Add64(accLo, uint64(b.Carry), 0)
	accHi += c
	needHi, needLo := bits.Mul64(missing, period)
	if accHi > needHi || (accHi == needHi && accLo >= needLo) {
		return true
	}
	// accrued < missing*period, so the quotient is < missing and fits.
	q, r := bits.Div64(accHi, accLo, period)
	b.Tokens += int64(q)
	b.Carry = int64(r)
	b.RefilledAt = now
	return false
}

// recount drops the rolling-window spends that are all given back and
// derives Tokens from the ones still out.
func (b *Bucket) recount(p Policy) {
	b.Spent = slices.DeleteFunc(b.Spent, func(s Spend) bool { return s.N == 0 })
	if len(b.Spent) == 0 {
		b.Spent = nil
	}
	b.Tokens = p.Capacity
	for _, s := range b.Spent {
		b.Tokens -= s.N
	}
}

// untilTokens returns how long after now the bucket will hold at least n
// whole tokens, assuming nothing else touches it; 0 if it already does.
// b must have been refilled to now. n must be <= p.Capacity.
func (b *Bucket) untilTokens(p Policy, n int64, now time.Time) time.Duration {
	if b.Tokens >= n {
		return 0
	}
	need := uint64(n - b.Tokens)
	var at time.Time
	switch p.Refill {
	case RefillRolling:
		var freed uint64
		for _, s := range b.Spent {
			freed += uint64(s.N)
			if freed >= need {
				at = s.At.Add(p.RefillPeriod)
				break
			}
		}
	case RefillStepwise:
		rate := uint64(p.RefillTokens)
		steps := (need + rate - 1) / rate
		at = b.RefilledAt.Add(time.Duration(steps * uint64(p.RefillPeriod)))
	default:
		// The smallest e with Carry + e*rate >= need*period:
		// e = ceil((need*period - Carry) / rate).
		hi, lo := bits.Mul64(need, uint64(p.RefillPeriod))
		var borrow uint64
		lo, borrow = bits.Sub64(lo, uint64(b.Carry), 0)
		hi -= borrow
		rate := uint64(p.RefillTokens)
		if hi >= rate { // the wait does not fit in 64 bits of nanoseconds
			return maxDuration
		}
		e, r := bits.Div64(hi, lo, rate)
		if r != 0 {
			e++
		}
		if e > uint64(maxDuration) {
			return maxDuration
		}
		at = b.RefilledAt.Add(time.Duration(e))
	}
	return max(at.Sub(now), 0)
}

// UntilFull returns how long after now the bucket will be full again; it is
// the reset time of the IETF RateLimit header.
func (b *Bucket) UntilFull(p Policy, now time.Time) time.Duration {
	return b.untilTokens(p, p.Capacity, now)
}

// untilCooldownEnds returns how long after now the cooldown runs out: the
// policy's minimum interval since the last admitted request, NextAt, or a
// hold (see HeldUntil), whichever is longest; 0 when none is pending.
func (b *Bucket) untilCooldownEnds(p Policy, now time.Time) time.Duration {
	var end time.Time
	if p.MinInterval > 0 && !b.LastSentAt.IsZero() {
		end = b.LastSentAt.Add(p.MinInterval)
	}
	wait := until(later(end, b.NextAt), now)
	if held := b.UntilReleased(now); held > 0 {
		if p.MinInterval > 0 {
			held = min(held, p.MinInterval)
		}
		wait = max(wait, held)
	}
	return wait
}

// UntilReleased returns how long after now the hold of a request on the
// wire lasts at most (0 when none).
func (b *Bucket) UntilReleased(now time.Time) time.Duration { return until(b.HeldUntil, now) }

// untilUnblocked returns how long after now the bucket's block lasts.
func (b *Bucket) untilUnblocked(now time.Time) time.Duration { return until(b.BlockedUntil, now) }

// until returns how long after now t is, 0 for the zero t ("never").
func until(t, now time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return max(t.Sub(now), 0)
}

// isIdle reports whether b, refilled to now, is equivalent to having no row
// at all: full, with no cooldown, block or block level pending. Such a row
// may be deleted.
func (b *Bucket) isIdle(p Policy, now time.Time) bool {
	return b.Tokens >= p.Capacity && len(b.Spent) == 0 && b.BlockLevel == 0 &&
		b.untilCooldownEnds(p, now) == 0 && b.untilUnblocked(now) == 0
}

// spend takes n tokens at now for an admitted request. b must have been
// refilled to now.
func (b *Bucket) spend(p Policy, n int64, now time.Time) {
	b.add(p, -n, now)
	b.LastSentAt = later(b.LastSentAt, now)
	b.SendCount++
}

// add changes the balance by delta at now, never above capacity, and returns
// the change actually applied (smaller than delta when a credit hits the
// capacity). b must have been refilled to now.
func (b *Bucket) add(p Policy, delta int64, now time.Time) int64 {
	if delta > 0 && b.Tokens+delta > p.Capacity {
		delta = max(p.Capacity-b.Tokens, 0)
	}
	switch {
	case delta == 0:
	case p.Refill != RefillRolling:
		b.Tokens += delta
		if b.Tokens >= p.Capacity {
			b.Carry = 0
		}
	case delta < 0:
		b.spendRolling(p, -delta, now)
	default:
		// A refund or credit gives back the newest spends first: it undoes
		// the most recent charge.
		left := delta
		for i := len(b.Spent) - 1; i >= 0 && left > 0; i-- {
			n := min(left, b.Spent[i].N)
			b.Spent[i].N -= n
			left -= n
		}
		b.recount(p)
	}
	return delta
}

// spendRolling adds n tokens spent at now to a rolling window's Spent and
// returns their stamp: the end of now's grain, or the newest spend when
// that is later (a clock stepped back), which only delays their return.
func (b *Bucket) spendRolling(p Policy, n int64, now time.Time) time.Time {
	at := p.grainEnd(now)
	if k := len(b.Spent); k > 0 && !b.Spent[k-1].At.Before(at) {
		at = b.Spent[k-1].At
		b.Spent[k-1].N += n
	} else {
		b.Spent = append(b.Spent, Spend{At: at, N: n})
	}
	b.recount(p)
	return at
}

// grainEnd returns t rounded up to a multiple of p.RollingGrain since the
// Unix epoch (t itself without a grain, or for an instant before 1970).
func (p Policy) grainEnd(t time.Time) time.Time {
	g := int64(p.RollingGrain)
	ns := t.UnixNano()
	if g <= 1 || ns <= 0 {
		return t
	}
	if r := ns % g; r != 0 {
		return t.Add(time.Duration(g - r))
	}
	return t
}

const maxDuration = time.Duration(1<<63 - 1)

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
