package dictsim

import "time"

// bucket is one token bucket as the DICT keeps it: refilled continuously
// (one token every period/refill), capped at capacity, and allowed to go
// negative after a costly answer. level counts tokens in units of
// 1/period-nanoseconds of a token, so refill is exact integer arithmetic.
type bucket struct {
	level int64
	at    time.Time
}

// refill brings b up to now under l (a clock that goes back adds nothing).
func (b *bucket) refill(l limit, now time.Time) {
	if !now.After(b.at) {
		return
	}
	full := l.capacity * int64(l.period)
	elapsed := int64(now.Sub(b.at))
	b.at = now
	if missing := full - b.level; missing <= 0 || elapsed >= (missing+l.refill-1)/l.refill {
		b.level = full
		return
	}
	b.level += elapsed * l.refill
}

// tokens is the balance in whole tokens (rounded down, also below zero).
func (b *bucket) tokens(l limit) int64 {
	p := int64(l.period)
	if b.level >= 0 {
		return b.level / p
	}
	return -((-b.level + p - 1) / p)
}

// untilPositive is the wait until the balance holds a whole token.
func (b *bucket) untilPositive(l limit) time.Duration {
	need := int64(l.period) - b.level
	if need <= 0 {
		return 0
	}
	return time.Duration((need + l.refill - 1) / l.refill)
}

// add changes the balance by n whole tokens, never above capacity, and
// returns the change applied.
func (b *bucket) add(l limit, n int64) int64 {
	full := l.capacity * int64(l.period)
	if n > 0 {
		room := max(full-b.level, 0) / int64(l.period)
		n = min(n, room)
		if n == 0 {
			return 0
		}
	}
	b.level = min(b.level+n*int64(l.period), full)
	return n
}
