package throttle

import (
	"slices"
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
type refusalCache struct {
	entries *lru.Cache[Key, refusal]
}

type refusal struct {
	until  time.Time // the key admits again at this instant
	cost   int64     // for requests costing at least this much
	policy Policy
	bucket Bucket // the state right after the refusal
}

func newRefusalCache(size int) *refusalCache {
	c, err := lru.New[Key, refusal](size)
	if err != nil {
		return nil
	}
	return &refusalCache{entries: c}
}

// check returns a refusal for the charges if one of their keys is
// remembered as refused at now for at least its cost.
func (c *refusalCache) check(ps []priced, now time.Time) (Decision, bool) {
	if c == nil {
		return Decision{}, false
	}
	for _, p := range ps {
		r, ok := c.entries.Get(p.Key)
		if !ok {
			continue
		}
		if !now.Before(r.until) {
			c.entries.Remove(p.Key)
			continue
		}
		if p.Cost < r.cost || p.policy != r.policy {
			continue
		}
		// The same pure rule as in the store, on the remembered state: the
		// answer is what the store would give if nobody else touched the key.
		b := r.bucket
		b.Refill(p.policy, now)
		bd := b.evaluate(p.policy, p.Cost, now)
		if bd.Reason == ReasonNone {
			c.entries.Remove(p.Key)
			continue
		}
		bd.Remaining, bd.ResetAfter = b.Tokens, b.UntilFull(p.policy, now)
		d := Decision{Buckets: []BucketDecision{bd}, Cached: true}
		d.decide()
		return d, true
	}
	return Decision{}, false
}

// remember records the refused keys of a decision taken at now, with the
// buckets' states right after it.
func (c *refusalCache) remember(d Decision, buckets []Bucket, now time.Time) {
	if c == nil {
		return
	}
	for i, bd := range d.Buckets {
		if bd.Reason == ReasonNone {
			if d.Allowed {
				c.entries.Remove(bd.Key)
			}
			continue
		}
		b := buckets[i]
		b.Spent = slices.Clone(b.Spent)
		c.entries.Add(bd.Key, refusal{until: now.Add(bd.RetryAfter), cost: bd.Cost, policy: bd.Policy, bucket: b})
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
