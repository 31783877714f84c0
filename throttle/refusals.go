package throttle

import (
	"context"
	"slices"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// refusalCache remembers, per key, until when a request of at least some
// cost will be refused, and answers such requests from memory
// (docs/decisions/0007-group-commit-and-refusal-cache.md). It is never more
// generous than the store: an entry lives until the instant the store said
// the key would admit again and answers only refusals that change nothing
// stored; a credit, refund, reset or admitted take through this Limiter
// drops it (another process's are not seen).
type refusalCache struct {
	entries *lru.Cache[Key, *refusal]
	// counting is off when the limiter writes no refusal rows
	// (Config.SkipRefusalRows): then nothing is counted or queued.
	counting bool

	mu  sync.Mutex
	due []refusalCount // groups to write with the next transaction
}

// RefusalGroupSpan bounds the refusals of one ledger row of refusals
// answered from memory: all lie within this span before the row's time
// (the newest's). Prune deletes such a row once At+RefusalGroupSpan is
// past the retention, so no refusal in it outlives the retention. It also
// bounds how long refusals wait to reach the ledger while their key keeps
// being hammered.
const RefusalGroupSpan = time.Minute

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

// newRefusalCache returns a cache of size entries, or nil (no cache) for a
// size below 1.
func newRefusalCache(size int, counting bool) *refusalCache {
	c := &refusalCache{counting: counting}
	entries, err := lru.NewWithEvict(size, func(_ Key, r *refusal) { c.queue(r) })
	if err != nil {
		return nil
	}
	c.entries = entries
	return c
}

// queue moves r's pending group, if any, to the groups to write.
func (c *refusalCache) queue(r *refusal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.queueLocked(r)
}

// queueLocked is queue with r.mu held.
func (c *refusalCache) queueLocked(r *refusal) {
	if r.pending.n == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.due = append(c.due, r.pending)
	r.pending.n = 0
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
// remembered as refused at now for at least its cost; flush is set when it
// queued a closed group, for the caller to write (drain). A charge under a
// policy with a BlockFor that is not remembered blocked leaves the decision
// to the store, which may start a block.
func (c *refusalCache) check(ps []priced, now time.Time) (d Decision, ok, flush bool) {
	if c == nil {
		return Decision{}, false, false
	}
	var (
		answer *refusal
		at     priced
		bd     BucketDecision
	)
	for _, p := range ps {
		r, bdp, found := c.lookup(p, now)
		if p.policy.BlockFor > 0 && (!found || bdp.Reason != ReasonBlocked) {
			return Decision{}, false, false // the store might start a block
		}
		if found && answer == nil {
			answer, at, bd = r, p, bdp
		}
	}
	if answer == nil {
		return Decision{}, false, false
	}
	d = Decision{Buckets: []BucketDecision{bd}, Cached: true}.decided()
	return d, true, c.count(answer, at, bd, now)
}

// lookup evaluates charge p on its key's remembered refusal at now: found
// is false when the key is not remembered, its entry expired (it is then
// dropped), the entry was for a larger cost or another policy, or the
// remembered bucket would admit p.
func (c *refusalCache) lookup(p priced, now time.Time) (*refusal, BucketDecision, bool) {
	r, found := c.entries.Get(p.Key)
	if !found {
		return nil, BucketDecision{}, false
	}
	if !now.Before(r.until) {
		c.entries.Remove(p.Key) // its pending group is queued by the eviction
		return nil, BucketDecision{}, false
	}
	if p.need() < r.cost || p.policy != r.policy {
		return nil, BucketDecision{}, false
	}
	// The same pure rule as in the store, on the remembered state: the
	// answer is what the store would give if nobody else touched the key.
	b := r.bucket
	b.Spent = slices.Clone(b.Spent)
	b.Refill(p.policy, now)
	bd := b.evaluate(p, now)
	if bd.Reason == ReasonNone {
		c.entries.Remove(p.Key)
		return nil, BucketDecision{}, false
	}
	bd.Remaining, bd.ResetAfter = b.Tokens, b.UntilFull(p.policy, now)
	return r, bd, true
}

// count adds a refusal answered from memory to r's pending group. A
// refusal of another reason, or RefusalGroupSpan or more after the group's
// first, closes the group (queued) and starts the next; count reports
// whether it queued one for the caller to write.
func (c *refusalCache) count(r *refusal, p priced, bd BucketDecision, now time.Time) bool {
	if !c.counting {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	closed := false
	if r.pending.n > 0 && (r.pending.reason != bd.Reason || now.Sub(r.first) >= RefusalGroupSpan || now.Before(r.first)) {
		c.queueLocked(r)
		closed = true
	}
	if r.pending.n == 0 {
		r.first = now
		r.pending = refusalCount{key: p.Key, policy: p.policy, reason: bd.Reason}
	}
	r.pending.n++
	r.pending.last, r.pending.balance = now, bd.Remaining
	return closed
}

// remember records the refused keys of a decision taken at now on the
// charges ps (in the decision's order), with copies of the buckets' states
// right after it (Tx.snapshot).
func (c *refusalCache) remember(d Decision, ps []priced, buckets []Bucket, now time.Time) {
	if c == nil {
		return
	}
	for i, bd := range d.Buckets {
		// A hold ends when its answer comes (Sync with Hold), and only
		// then is the wait known: the store decides.
		if bd.Reason == ReasonNone || buckets[i].HeldUntil.After(now) {
			continue
		}
		if old, ok := c.entries.Peek(bd.Key); ok {
			// Add replaces an entry without evicting it: its refusals
			// answered from memory are queued here, or they are lost.
			c.queue(old)
		}
		c.entries.Add(bd.Key, &refusal{until: now.Add(bd.RetryAfter), cost: ps[i].need(), policy: bd.Policy, bucket: buckets[i]})
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
	for _, r := range c.entries.Values() {
		c.queue(r)
	}
	return c.drain()
}

// FlushRefusals writes to the ledger every refusal this limiter answered
// from memory and has not written yet, in one transaction. Call it before
// counting refusals from the ledger and before the process exits; the
// limiter also writes them on its own (see refusalCache).
func (l *Limiter) FlushRefusals(ctx context.Context) error {
	return l.writeRefusals(ctx, l.refused.pendingAll())
}

func (l *Limiter) writeRefusals(ctx context.Context, due []refusalCount) error {
	if len(due) == 0 {
		return nil
	}
	err := l.update(ctx, keysOf(due, refusalKey), nil, func(tx *Tx) error {
		tx.recordRefusals(due)
		return nil
	})
	if err != nil {
		l.refused.requeue(due)
	}
	return err
}
