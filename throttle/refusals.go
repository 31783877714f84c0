package throttle

import (
	"context"
	"slices"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// refusalCache remembers, per key, until when a request of at least some
// cost will be refused, so that a scanner hammering an empty bucket is
// answered from memory, without a database round trip.
//
// It can only be stricter than the store: an entry lives until the exact
// instant the store said the key would admit again, and a credit, refund or
// reset made through this Limiter drops the key's entry. A credit or reset
// made by ANOTHER process is not seen, so this process may keep refusing the
// key until the remembered instant: never more generous than the mirror,
// as the DICT manual requires of a participant's internal limit.
//
// Refusals answered from memory are still written to the ledger, as one row
// per key and group (Count refusals, stamped with the last one's time): with
// the limiter's next transaction once their entry expires or is evicted,
// inline once a group is older than refusalFlushEvery, and whenever
// Limiter.FlushRefusals is called.
type refusalCache struct {
	entries *lru.Cache[Key, *refusal]
	// counting is off when the limiter writes no refusal rows
	// (Config.SkipRefusalRows): then nothing is counted or queued.
	counting bool

	mu  sync.Mutex
	due []refusalCount // groups to write with the next transaction
}

// refusalFlushEvery bounds how long refusals answered from memory wait to
// reach the ledger while their key keeps being hammered.
const refusalFlushEvery = time.Minute

type refusal struct {
	until  time.Time // the key admits again at this instant
	cost   int64     // for requests costing at least this much
	policy Policy
	bucket Bucket // the state right after the refusal

	mu      sync.Mutex
	pending refusalCount // refusals answered from memory, not yet written
	first   time.Time    // when the pending group started
}

// refusalCount is a group of refusals of one key to write to the ledger.
type refusalCount struct {
	key    Key
	policy Policy
	reason Reason
	n      int64
	last   time.Time
	// balance is what the last refusal of the group saw.
	balance int64
}

func newRefusalCache(size int, counting bool) *refusalCache {
	c := &refusalCache{counting: counting}
	entries, err := lru.NewWithEvict(size, func(_ Key, r *refusal) { c.queue(r.takePending()) })
	if err != nil {
		return nil
	}
	c.entries = entries
	return c
}

// takePending empties the entry's pending group and returns it.
func (r *refusal) takePending() refusalCount {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pending
	r.pending.n = 0
	return p
}

func (c *refusalCache) queue(p refusalCount) {
	if p.n == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.due = append(c.due, p)
}

// drain returns the groups waiting to be written.
func (c *refusalCache) drain() []refusalCount {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	due := c.due
	c.due = nil
	return due
}

// requeue gives back groups whose transaction failed.
func (c *refusalCache) requeue(due []refusalCount) {
	if c == nil || len(due) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.due = append(due, c.due...)
}

// check returns a refusal for the charges if one of their keys is
// remembered as refused at now for at least its cost. flush is set when the
// key's pending group became a minute old and was queued: the caller
// should write the queue now (drain).
func (c *refusalCache) check(ps []priced, now time.Time) (d Decision, ok, flush bool) {
	if c == nil {
		return Decision{}, false, false
	}
	for _, p := range ps {
		r, found := c.entries.Get(p.Key)
		if !found {
			continue
		}
		if !now.Before(r.until) {
			c.entries.Remove(p.Key) // its pending group is queued by the eviction
			continue
		}
		if p.need() < r.cost || p.policy != r.policy {
			continue
		}
		// The same pure rule as in the store, on the remembered state: the
		// answer is what the store would give if nobody else touched the key.
		b := r.bucket
		b.Refill(p.policy, now)
		bd := b.evaluate(p.policy, p.need(), now)
		bd.Cost = p.Cost
		if bd.Reason == ReasonNone {
			c.entries.Remove(p.Key)
			continue
		}
		bd.Remaining, bd.ResetAfter = b.Tokens, b.UntilFull(p.policy, now)
		d := Decision{Buckets: []BucketDecision{bd}, Cached: true}
		d.decide()
		return d, true, c.count(r, p, bd, now)
	}
	return Decision{}, false, false
}

// count adds a refusal answered from memory to r's pending group and
// queues the group once it is refusalFlushEvery old; it reports whether it
// did.
func (c *refusalCache) count(r *refusal, p priced, bd BucketDecision, now time.Time) bool {
	if !c.counting {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending.n > 0 && r.pending.reason != bd.Reason {
		c.queue(r.pending) // a new reason starts a new group
		r.pending.n = 0
	}
	if r.pending.n == 0 {
		r.first = now
		r.pending = refusalCount{key: p.Key, policy: p.policy, reason: bd.Reason}
	}
	r.pending.n++
	r.pending.last, r.pending.balance = now, bd.Remaining
	if now.Sub(r.first) < refusalFlushEvery {
		return false
	}
	c.queue(r.pending)
	r.pending.n = 0
	return true
}

// remember records the refused keys of a decision taken at now on the
// charges ps (in the decision's order), with the buckets' states right
// after it.
func (c *refusalCache) remember(d Decision, ps []priced, buckets []Bucket, now time.Time) {
	if c == nil {
		return
	}
	for i, bd := range d.Buckets {
		if bd.Reason == ReasonNone {
			continue
		}
		need := ps[i].need()
		b := buckets[i]
		if b.HeldUntil.After(now) {
			// A hold ends when its answer comes (Sync with Hold), and
			// only then is the wait known: the store decides.
			continue
		}
		b.Spent = slices.Clone(b.Spent)
		c.entries.Add(bd.Key, &refusal{until: now.Add(bd.RetryAfter), cost: need, policy: bd.Policy, bucket: b})
	}
}

// forget drops the entries of keys whose balance went up.
func (c *refusalCache) forget(keys ...Key) {
	if c == nil {
		return
	}
	for _, k := range keys {
		c.entries.Remove(k)
	}
}

// pendingAll moves every entry's pending group to the due list and drains it.
func (c *refusalCache) pendingAll() []refusalCount {
	if c == nil {
		return nil
	}
	for _, k := range c.entries.Keys() {
		if r, ok := c.entries.Peek(k); ok {
			c.queue(r.takePending())
		}
	}
	return c.drain()
}

// FlushRefusals writes to the ledger every refusal this limiter answered
// from memory and has not written yet, in one transaction. Call it before
// counting refusals from the ledger and before the process exits; the
// limiter also writes them on its own within refusalFlushEvery.
func (l *Limiter) FlushRefusals(ctx context.Context) error {
	return l.writeRefusals(ctx, l.refused.pendingAll())
}

func (l *Limiter) writeRefusals(ctx context.Context, due []refusalCount) error {
	if len(due) == 0 {
		return nil
	}
	err := l.update(ctx, refusalKeys(due), nil, func(tx *Tx) error {
		tx.recordRefusals(due)
		return nil
	})
	if err != nil {
		l.refused.requeue(due)
	}
	return err
}

func refusalKeys(due []refusalCount) []Key {
	keys := make([]Key, len(due))
	for i, r := range due {
		keys[i] = r.key
	}
	return keys
}
