package dict

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// Meter applies the catalog's counting rules to a Limiter that resolves the
// catalog's policies: hold before a request, settle by its outcome, credit a
// payment.
type Meter struct {
	Limiter  *throttle.Limiter
	Catalog  *Catalog
	holds    *holds    // this process's requests in flight
	readings *readings // the participant readings after remote 429s
}

// reservation is what reserve took: Reserved[i] tokens (the worst case)
// from Keys[i]; nothing when Decision is a refusal.
type reservation struct {
	Op, Ref  string
	Keys     []throttle.Key
	Reserved []int64
	Decision throttle.Decision
	flight   *flight // its entry in holds while in flight
	// For flightRefill: when it was taken and whether Keys[i]'s bucket was full.
	takenAt    time.Time
	fullAtTake []bool
}

// holds counts, per bucket, the tokens held by this process's requests in
// flight, which a sync to the DICT's balance leaves out (decision 0067);
// Transport.meter makes it. Safe for concurrent use.
type holds struct {
	mu      sync.Mutex
	held    map[throttle.Key]int64
	watches map[*watch]struct{} // running
}

// watch counts what the mirror kept of the requests that landed since it
// started, which a balance the DICT read meanwhile may not count (decision
// 0067). A nil *watch counts nothing.
type watch struct {
	holds  *holds
	landed map[throttle.Key]int64 // under holds.mu
}

// watch starts a watch; stop it once the sync is done.
func (h *holds) watch() *watch {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := &watch{holds: h, landed: make(map[throttle.Key]int64)}
	h.watches[w] = struct{}{}
	return w
}

func (w *watch) stop() {
	w.holds.mu.Lock()
	defer w.holds.mu.Unlock()
	delete(w.holds.watches, w)
}

// held is what a sync of key to a balance read during w leaves out: the
// holds in flight and what the mirror kept of those landed.
func (w *watch) held(key throttle.Key) int64 {
	if w == nil {
		return 0
	}
	w.holds.mu.Lock()
	defer w.holds.mu.Unlock()
	return w.holds.held[key] + w.landed[key]
}

// flight is one request's entry in holds (its reservation's Reserved
// from Keys), removed once.
type flight struct {
	holds   *holds
	removed bool // under holds.mu
}

func (h *holds) inFlight(key throttle.Key) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held[key]
}

// add counts a request's holds before its take.
func (h *holds) add(keys []throttle.Key, reserved []int64) *flight {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, k := range keys {
		h.held[k] += reserved[i]
	}
	return &flight{holds: h}
}

// land removes r's holds from flight, once. The running watches count
// kept[i], what the settle charged Keys[i], or the whole hold when kept is nil.
func (r reservation) land(kept []int64) {
	f := r.flight
	h := f.holds
	h.mu.Lock()
	defer h.mu.Unlock()
	if f.removed {
		return
	}
	f.removed = true
	for i, k := range r.Keys {
		if h.held[k] -= r.Reserved[i]; h.held[k] <= 0 {
			delete(h.held, k)
		}
		n := r.Reserved[i]
		if kept != nil {
			n = max(kept[i], 0)
		}
		for w := range h.watches {
			w.landed[k] += n
		}
	}
}

// but is n, held on key, less what r still holds in flight from key (at least 0).
func (r reservation) but(key throttle.Key, n int64) int64 {
	f := r.flight
	f.holds.mu.Lock()
	defer f.holds.mu.Unlock()
	for i, k := range r.Keys {
		if k == key && !f.removed {
			n -= r.Reserved[i]
		}
	}
	return max(n, 0)
}

// landed takes r out of flight for good, its whole hold counted landed.
func (r reservation) landed() { r.land(nil) }

// policyTargets returns the syncs of participant's PSP buckets to the
// balances of an answer of GET /policies/, less what held counts;
// POLICIES_LIST, whose number counts the listing itself, leaves out only the
// holds in flight (decision 0067). unknown lists the other policies.
func (m *Meter) policyTargets(participant string, policies []Policy, held *watch, ref string) (targets []throttle.SyncTarget, unknown []string) {
	for _, p := range policies {
		spec, ok := m.Catalog.Spec(p.Name)
		if !ok || spec.Scope != ScopePSP {
			unknown = append(unknown, p.Name)
			continue
		}
		key := m.Catalog.Key(p.Name, participant)
		tokens := p.AvailableTokens - held.held(key)
		if p.Name == policyPoliciesList {
			tokens = p.AvailableTokens - m.holds.inFlight(key)
		}
		targets = append(targets, throttle.SyncTarget{Key: key, Tokens: tokens, Ref: ref})
	}
	return targets, unknown
}

// outcomeOf names an HTTP status as an outcome of the counting rules ("404").
func outcomeOf(status int) string { return strconv.Itoa(status) }

// reserve takes, all or nothing, the worst-case cost of the request from
// each key (Catalog.Hold), admitted while each bucket holds its Admission. A
// refusal is r.Decision with a nil error: nothing was taken.
func (m *Meter) reserve(ctx context.Context, op, ref string, keys ...throttle.Key) (reservation, error) {
	r := reservation{Op: op, Ref: ref, Keys: keys, Reserved: make([]int64, len(keys))}
	charges := make([]throttle.Charge, len(keys))
	for i, k := range keys {
		hold, err := m.Catalog.Hold(k)
		if err != nil {
			return r, err
		}
		admit, _ := m.Catalog.Admission(k) // a policy Hold found stays in the catalog
		r.Reserved[i] = hold
		charges[i] = throttle.Charge{Key: k, Cost: hold}
		if admit < hold {
			charges[i].Admit = admit
		}
	}
	// In flight before the take: a sync meanwhile leaves the hold out twice, never not at all.
	r.flight = m.holds.add(keys, r.Reserved)
	r.takenAt = m.Limiter.Now()
	d, err := m.Limiter.Take(ctx, ref, charges...)
	if err != nil || !d.Allowed {
		r.landed()
	}
	if err != nil {
		return r, fmt.Errorf("dict: %s: %w", op, err)
	}
	r.Decision = d
	if d.Allowed && !d.FailOpen {
		r.fullAtTake = make([]bool, len(keys))
		for i, k := range keys {
			j := slices.IndexFunc(d.Buckets, func(b throttle.BucketDecision) bool { return b.Key == k })
			r.fullAtTake[i] = j >= 0 && d.Buckets[j].Remaining+r.Reserved[i] >= d.Buckets[j].Policy.Capacity
		}
	}
	return r, nil
}

// gradePending reports whether the take of r left key's grading to the settle.
func (r reservation) gradePending(key throttle.Key) bool {
	return slices.ContainsFunc(r.Decision.Buckets, func(b throttle.BucketDecision) bool { return b.Key == key && b.GradePending })
}

// flightRefill is what Keys[i]'s bucket refilled (whole tokens, rounded up)
// since r's take when it refills continuously, was full at the take and the
// request cost something: the DICT refills a full bucket only from its
// charge, so settle charges it back (decision 0067).
func (m *Meter) flightRefill(r reservation, i int, cost int64, now time.Time) int64 {
	if cost <= 0 || i >= len(r.fullAtTake) || !r.fullAtTake[i] {
		return 0
	}
	p, err := m.Catalog.Resolve(r.Keys[i])
	if err != nil || p.Refill != throttle.RefillContinuous {
		return 0
	}
	b := throttle.Bucket{RefilledAt: r.takenAt} // empty at the take: Refill counts what came since, capped
	b.Refill(p, now)
	if b.Carry > 0 { // part of a token
		b.Tokens++
	}
	return b.Tokens
}

// settle gives back the difference between the hold and the cost of outcome
// (outcomeTransportError keeps the hold; a cost above it is a penalty) and
// applies targets in the same transaction. r leaves holds once it commits.
func (m *Meter) settle(ctx context.Context, r reservation, outcome string, targets ...throttle.SyncTarget) ([]throttle.Adjusted, error) {
	var adjs []throttle.Adjustment
	now := m.Limiter.Now()
	var kept []int64 // nil: the whole hold (a transport error keeps it)
	if outcome != outcomeTransportError {
		kept = make([]int64, len(r.Keys))
	}
	for i, k := range r.Keys[:len(kept)] {
		cost := int64(0)
		if outcome != outcomeNotSent {
			var err error
			if cost, err = m.Catalog.cost(k, outcome); err != nil {
				return nil, err
			}
			cost += m.flightRefill(r, i, cost, now)
		}
		kept[i] = cost
		// A refund of 0 grades the balance a whole hold left (decision 0100).
		if delta := r.Reserved[i] - cost; delta != 0 || r.gradePending(k) {
			reason := throttle.LedgerRefund
			if delta < 0 {
				reason = throttle.LedgerPenalty
			}
			adjs = append(adjs, throttle.Adjustment{Key: k, Delta: delta, Reason: reason, Ref: r.Ref})
		}
	}
	if len(adjs) == 0 && len(targets) == 0 {
		r.land(kept)
		return nil, nil
	}
	out, err := m.Limiter.AdjustAndSync(ctx, adjs, targets)
	if err != nil {
		return nil, fmt.Errorf("dict: settle %s as %s: %w", r.Op, outcome, err)
	}
	r.land(kept)
	return out, nil
}

// credit gives each key the tokens event earns, capped at capacity, at most
// once per (key, ref); errUnknownOutcome, crediting nothing, when a policy
// does not credit event.
func (m *Meter) credit(ctx context.Context, ref, event string, keys ...throttle.Key) ([]throttle.Adjusted, error) {
	adjs := make([]throttle.Adjustment, len(keys))
	for i, k := range keys {
		n, err := m.Catalog.Credit(k, event)
		if err != nil {
			return nil, err
		}
		adjs[i] = throttle.Adjustment{Key: k, Delta: n, Reason: throttle.LedgerCredit, Ref: ref}
	}
	out, err := m.Limiter.Adjust(ctx, adjs...)
	if err != nil {
		return nil, fmt.Errorf("dict: credit %s %s: %w", event, ref, err)
	}
	return out, nil
}

// LookupKeys returns the two buckets a getEntry is charged to: the payer's
// USER anti-scan bucket for keyType (userPolicyFor) and the participant's.
func (c *Catalog) LookupKeys(keyType KeyType, payerID, participant string) []throttle.Key {
	return []throttle.Key{
		c.Key(userPolicyFor(keyType), payerID),
		c.Key(PolicyEntriesReadParticipantAntiscan, participant),
	}
}
