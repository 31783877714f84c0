package throttle

import (
	"slices"
	"sync"
	"time"
)

// Quota leases (docs/decisions/0221-quota-leases-for-hot-rolling-keys.md):
// the transaction that admits a request on a hot key of a rolling window
// with a grain also spends a slice of the tokens left, stamped at the end
// of its grain, from which this process admits the grain's next requests;
// the key's next transaction gives back what was not spent.

// leaseShare is the part of the tokens left a lease takes at most, never
// below half the capacity: near its limit a key is decided one transaction
// at a time, so no token is stranded in a lease another process lacks.
const leaseShare = 4

// maxLeases bounds the keys a Limiter keeps leases and counts for.
const maxLeases = 1 << 16

// leases are a Limiter's quota leases, by key. Safe for concurrent use.
type leases struct {
	span time.Duration
	mu   sync.Mutex
	m    map[Key]*lease
}

// lease is one key's lease and demand in this process.
type lease struct {
	// stamp is when the lease's tokens were spent (a grain's end); left of
	// them are not used yet; remaining is the balance after the lease.
	stamp     time.Time
	left      int64
	remaining int64
	// seen counts this process's requests on the key since since;
	// prevSeen, in the span before.
	since          time.Time
	seen, prevSeen int64
	// back is a lease's rest to give back, spent at backAt.
	back   int64
	backAt time.Time
	// taking is closed when the lease transaction in flight ends (nil:
	// none); starved: the last lease found no tokens to spare, so callers
	// do not wait for one.
	taking  chan struct{}
	starved bool
}

func newLeases(span time.Duration) *leases {
	if span <= 0 {
		return nil
	}
	return &leases{span: span, m: make(map[Key]*lease)}
}

// leasable reports whether a Take of ps may use leases: one charge, on a
// rolling window with a grain and no cooldown, neither held nor partial.
func (ls *leases) leasable(ps []priced) bool {
	if ls == nil || len(ps) != 1 {
		return false
	}
	p := ps[0]
	return p.policy.Refill == RefillRolling && p.policy.RollingGrain > 0 && p.policy.MinInterval == 0 &&
		p.HoldFor == 0 && p.Admit == 0
}

// entryLocked returns key's entry, counting a request at now.
func (ls *leases) entryLocked(key Key, now time.Time) *lease {
	e, ok := ls.m[key]
	if !ok {
		if len(ls.m) >= maxLeases {
			// Forgetting a lease only keeps its rest spent; its waiters
			// try again.
			for _, old := range ls.m {
				if old.taking != nil {
					close(old.taking)
				}
			}
			ls.m = make(map[Key]*lease)
		}
		e = &lease{since: now}
		ls.m[key] = e
	}
	if now.Sub(e.since) >= ls.span {
		e.prevSeen, e.seen, e.since = e.seen, 0, now
	}
	e.seen++
	return e
}

// use admits c from key's lease at now when it holds c's cost and c's
// grain ends no later than the lease's stamp.
func (ls *leases) use(c priced, now time.Time) (Decision, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	e := ls.entryLocked(c.Key, now)
	if e.left < c.Cost || c.policy.grainEnd(now).After(e.stamp) {
		return Decision{}, false
	}
	e.left -= c.Cost
	bd := BucketDecision{Key: c.Key, Policy: c.policy, Cost: c.Cost, Remaining: e.remaining}
	return Decision{Allowed: true, Buckets: []BucketDecision{bd}}.decided(), true
}

// pending returns key's rest to give back (and forgets it) and the slice a
// new lease should take (0: none). When a lease of the key is being taken
// already it returns instead a channel closed when that one ends, to wait
// for and try again: the callers of a hot key take one lease, not one
// each. A caller with lead set must call taken once its transaction ends.
func (ls *leases) pending(key Key, now time.Time) (back int64, backAt time.Time, want int64, lead bool, wait <-chan struct{}) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	e, ok := ls.m[key]
	if !ok {
		return 0, time.Time{}, 0, false, nil
	}
	if e.taking != nil {
		return 0, time.Time{}, 0, false, e.taking
	}
	if e.left > 0 && now.After(e.stamp) {
		e.back, e.backAt, e.left = e.left, e.stamp, 0
	}
	back, backAt = e.back, e.backAt
	e.back = 0
	// The requests expected in a span, this one among them.
	want = max(e.seen, e.prevSeen) - 1
	if want > 0 && !e.starved {
		e.taking, lead = make(chan struct{}), true
	}
	return back, backAt, want, lead, nil
}

// with calls f on key's entry, if it has one, under the lock.
func (ls *leases) with(key Key, f func(e *lease)) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if e, ok := ls.m[key]; ok {
		f(e)
	}
}

// taken ends the lease transaction of key that pending started.
func (ls *leases) taken(key Key) {
	ls.with(key, func(e *lease) {
		if e.taking != nil {
			close(e.taking)
			e.taking = nil
		}
	})
}

// starve notes that a lease asked for on key found no tokens to spare.
func (ls *leases) starve(key Key) { ls.with(key, func(e *lease) { e.starved = true }) }

// granted records a lease of n tokens at stamp, remaining left after it (a
// key forgotten meanwhile keeps the lease spent).
func (ls *leases) granted(key Key, n int64, stamp time.Time, remaining int64) {
	ls.with(key, func(e *lease) {
		if e.left > 0 && !e.stamp.Equal(stamp) {
			// Two leases of one key at once (concurrent takes): the older
			// one's rest is given back later, or stays spent.
			e.back, e.backAt = e.left, e.stamp
		}
		if e.stamp.Equal(stamp) {
			n += e.left
		}
		e.stamp, e.left, e.remaining, e.starved = stamp, n, remaining, false
	})
}

// leaseIn spends, in tx, up to want of c's bucket's tokens left (at most
// a leaseShare of them, never below half the capacity) at the end of the
// grain of tx's instant, and returns the tokens leased and their stamp.
// The bucket must have admitted c in tx.
func (tx *Tx) leaseIn(c priced, want int64, ref string) (int64, time.Time) {
	p := c.policy
	tb := tx.bucket(c.Key, p)
	n := min(want, tb.b.Tokens/leaseShare, tb.b.Tokens-p.Capacity/2)
	if n < 1 {
		return 0, time.Time{}
	}
	stamp := tb.b.spendRolling(p, n, tx.now)
	tx.recordTake(tb, p, -n, ledgerLease, ref)
	return n, stamp
}

// unleaseIn gives back, in tx, up to n tokens spent at stamp on key's
// bucket (a lease's rest): only tokens of that stamp, so no other spend
// comes back sooner than it would have.
func (tx *Tx) unleaseIn(key Key, p Policy, n int64, stamp time.Time, ref string) {
	tb := tx.bucket(key, p)
	if i := slices.IndexFunc(tb.b.Spent, func(s Spend) bool { return s.At.Equal(stamp) }); i >= 0 {
		n = min(n, tb.b.Spent[i].N)
		tb.b.Spent[i].N -= n
		tb.b.recount(p)
		tx.recordTake(tb, p, n, ledgerLeaseReturn, ref)
	}
}
