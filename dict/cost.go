package dict

import (
	"context"
	"fmt"
	"math/bits"
	"strconv"
	"sync"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// Meter applies the catalog's counting rules to a Limiter that resolves
// the catalog's policies (the Catalog itself, or a throttle.Resolvers chain
// holding it): hold before a request, settle by its outcome, credit a
// payment. Client and Transport use one on the local mirror; the simulator
// (dictsim) counts with its own rules, written independently.
type Meter struct {
	Limiter *throttle.Limiter
	Catalog *Catalog
	// holds counts this process's requests in flight (nil: none counted,
	// syncs take the DICT's number as it is).
	holds *holds
	// readings are the participant readings asked after remote 429s, one
	// in flight per participant (nil: none asked).
	readings *readings
}

// reservation is what reserve took: Reserved[i] tokens (the worst case)
// from Keys[i]; nothing when Decision is a refusal.
type reservation struct {
	Op, Ref  string
	Keys     []throttle.Key
	Reserved []int64
	Decision throttle.Decision
	flight   *flight // its entry in holds while in flight
	// takenAt and fullAtTake[i] (Keys[i]'s bucket full at the take) are
	// for flightRefill.
	takenAt    time.Time
	fullAtTake []bool
}

// holds counts, per bucket, the tokens held by this process's requests in
// flight; a sync to the DICT's balance leaves them out so that their
// refunds land where the DICT will be (decision 0067). The zero value is
// ready; safe for concurrent use.
type holds struct {
	mu      sync.Mutex
	held    map[throttle.Key]int64
	watches map[*watch]struct{} // running
}

// watch counts what the mirror kept of the requests that landed since it
// started: a balance the DICT read meanwhile may or may not count them, so
// a sync to it leaves them out (decision 0067). One per read of the DICT;
// a nil *watch counts nothing.
type watch struct {
	holds  *holds
	landed map[throttle.Key]int64 // under holds.mu
}

// watch starts a watch; stop it once the sync is done.
func (h *holds) watch() *watch {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	w := &watch{holds: h, landed: make(map[throttle.Key]int64)}
	if h.watches == nil {
		h.watches = make(map[*watch]struct{})
	}
	h.watches[w] = struct{}{}
	return w
}

func (w *watch) stop() {
	if w != nil {
		w.holds.mu.Lock()
		defer w.holds.mu.Unlock()
		delete(w.holds.watches, w)
	}
}

// held is what a sync of key to a balance the DICT read during w leaves
// out: the holds in flight now and what the mirror kept of those landed.
func (w *watch) held(key throttle.Key) int64 {
	if w == nil {
		return 0
	}
	w.holds.mu.Lock()
	defer w.holds.mu.Unlock()
	return w.holds.held[key] + w.landed[key]
}

// heldBut is held without r's own hold.
func (w *watch) heldBut(key throttle.Key, r reservation) int64 {
	return max(w.held(key)-r.flight.heldBy(key), 0)
}

// flight is one request's entry in holds, removed once.
type flight struct {
	holds    *holds
	keys     []throttle.Key
	reserved []int64
	removed  bool // under holds.mu
}

func (h *holds) inFlight(key throttle.Key) int64 {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held[key]
}

// add counts a request's holds before its take.
func (h *holds) add(keys []throttle.Key, reserved []int64) *flight {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		h.held = make(map[throttle.Key]int64)
	}
	for i, k := range keys {
		h.held[k] += reserved[i]
	}
	return &flight{holds: h, keys: keys, reserved: reserved}
}

// land removes f's holds, once. The running watches count kept[i], what
// the settle left charged to keys[i] (the DICT charged no more), or the
// whole hold when kept is nil (the outcome is unknown).
func (f *flight) land(kept []int64) {
	if f == nil {
		return
	}
	h := f.holds
	h.mu.Lock()
	defer h.mu.Unlock()
	if f.removed {
		return
	}
	f.removed = true
	for i, k := range f.keys {
		if h.held[k] -= f.reserved[i]; h.held[k] <= 0 {
			delete(h.held, k)
		}
		n := f.reserved[i]
		if kept != nil {
			n = max(kept[i], 0)
		}
		for w := range h.watches {
			w.landed[k] += n
		}
	}
}

// heldBy returns what f still holds from key.
func (f *flight) heldBy(key throttle.Key) int64 {
	if f == nil {
		return 0
	}
	f.holds.mu.Lock()
	defer f.holds.mu.Unlock()
	var n int64
	for i, k := range f.keys {
		if k == key && !f.removed {
			n += f.reserved[i]
		}
	}
	return n
}

// landed takes r out of flight for good (its whole hold counted landed):
// for a reservation dropped without a settle that committed.
func (r reservation) landed() { r.flight.land(nil) }

// policyTargets returns the syncs of participant's PSP buckets to the
// balances of policies (an answer of GET /policies/), less what held
// counts: the requests on the wire while the DICT read them, which its
// number may not include (it charges as it answers). The listing's own
// hold on POLICIES_LIST landed meanwhile but is in the number: that bucket
// leaves out only the holds still in flight (decision 0067). unknown lists
// the policies that are no PSP policy of the catalog.
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

// inFlightBut is the holds in flight on key but r's.
func (m *Meter) inFlightBut(key throttle.Key, r reservation) int64 {
	return max(m.holds.inFlight(key)-r.flight.heldBy(key), 0)
}

// outcomeOf names an HTTP status as an outcome of the counting rules ("404").
func outcomeOf(status int) string { return strconv.Itoa(status) }

// reserve takes, all or nothing, the worst-case cost of the request from
// each key (Catalog.hold: 20 from a payer and 3 from the participant for a
// getEntry), admitted while each bucket holds the policy's admission (1:
// the DICT admits while the balance is positive), so that requests in
// flight never overdraw the DICT's buckets. A refusal is r.Decision with a
// nil error: nothing was taken.
func (m *Meter) reserve(ctx context.Context, op, ref string, keys ...throttle.Key) (reservation, error) {
	r := reservation{Op: op, Ref: ref, Keys: keys, Reserved: make([]int64, len(keys))}
	charges := make([]throttle.Charge, len(keys))
	for i, k := range keys {
		admit, err := m.Catalog.Admission(k)
		if err != nil {
			return r, err
		}
		hold, err := m.Catalog.Hold(k)
		if err != nil {
			return r, err
		}
		r.Reserved[i] = hold
		charges[i] = throttle.Charge{Key: k, Cost: hold}
		if admit < hold {
			charges[i].Admit = admit
		}
	}
	// Counted in flight before the take: a sync that runs while the take
	// commits leaves the hold out twice (stricter), never not at all.
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
		for _, b := range d.Buckets {
			for i, k := range keys {
				if k == b.Key && b.Remaining+r.Reserved[i] >= b.Policy.Capacity {
					r.fullAtTake[i] = true
				}
			}
		}
	}
	return r, nil
}

// gradePending reports whether the take of r left the severity of key's
// bucket to the settle (throttle.BucketDecision.GradePending).
func (r reservation) gradePending(key throttle.Key) bool {
	for _, b := range r.Decision.Buckets {
		if b.Key == key {
			return b.GradePending
		}
	}
	return false
}

// flightRefill is what key's bucket refilled, in whole tokens rounded up,
// between r's take and now, when it refills continuously, was full at the
// take and the DICT charged the request: the DICT refills a full bucket
// only from its charge, so settle charges it back (decision 0067).
func (m *Meter) flightRefill(r reservation, i int, cost int64, now time.Time) int64 {
	if cost <= 0 || i >= len(r.fullAtTake) || !r.fullAtTake[i] || !now.After(r.takenAt) {
		return 0
	}
	p, err := m.Catalog.Resolve(r.Keys[i])
	if err != nil || p.RefillPeriod <= 0 || p.Refill != throttle.RefillContinuous {
		return 0
	}
	elapsed := now.Sub(r.takenAt)
	hi, lo := bits.Mul64(uint64(elapsed), uint64(p.RefillTokens))
	period := uint64(p.RefillPeriod)
	if hi >= period {
		return p.Capacity // a flight longer than the bucket's whole refill
	}
	q, rem := bits.Div64(hi, lo, period)
	if rem > 0 {
		q++
	}
	return int64(min(q, uint64(p.Capacity)))
}

// settle gives back the difference between the hold and the cost of
// outcome (a 200 refunds 19 and 2, a 404 nothing, a 500, a 429 or
// outcomeNotSent the whole hold; outcomeTransportError keeps it; a cost
// above the hold is a penalty), then applies targets in the same
// transaction: a remote 429's refund and the sync of the bucket the DICT
// says is empty land together. r leaves holds only once it commits, so a
// sync meanwhile leaves its hold out (stricter).
func (m *Meter) settle(ctx context.Context, r reservation, outcome string, targets ...throttle.SyncTarget) ([]throttle.Adjusted, error) {
	var adjs []throttle.Adjustment
	now := m.Limiter.Now()
	var kept []int64 // nil: the whole hold (a transport error keeps it)
	if outcome != outcomeTransportError {
		kept = make([]int64, len(r.Keys))
	}
	for i, k := range r.Keys {
		if outcome == outcomeTransportError {
			break
		}
		cost := int64(0)
		if outcome != outcomeNotSent {
			var err error
			if cost, err = m.Catalog.cost(k, outcome); err != nil {
				return nil, err
			}
			cost += m.flightRefill(r, i, cost, now)
		}
		kept[i] = cost
		switch delta := r.Reserved[i] - cost; {
		case delta < 0:
			adjs = append(adjs, throttle.Adjustment{Key: k, Delta: delta, Reason: throttle.LedgerPenalty, Ref: r.Ref})
		case delta > 0:
			adjs = append(adjs, throttle.Adjustment{Key: k, Delta: delta, Reason: throttle.LedgerRefund, Ref: r.Ref})
		case r.gradePending(k):
			// The outcome cost the whole hold, which the take did not grade
			// (a hold in flight is not trouble): a refund of 0 grades the
			// balance it left (decision 0100).
			adjs = append(adjs, throttle.Adjustment{Key: k, Reason: throttle.LedgerRefund, Ref: r.Ref})
		}
	}
	if len(adjs) == 0 && len(targets) == 0 {
		r.flight.land(kept)
		return nil, nil
	}
	out, err := m.Limiter.AdjustAndSync(ctx, adjs, targets)
	if err != nil {
		return nil, fmt.Errorf("dict: settle %s as %s: %w", r.Op, outcome, err)
	}
	r.flight.land(kept)
	return out, nil
}

// credit gives each key the tokens event earns (a payment: +1 to a PF
// payer, +2 to a PJ payer, +1 to the participant), capped at capacity, at
// most once per (key, ref). Errors: errUnknownOutcome when a policy does
// not credit event (nothing is credited).
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

// LookupKeys returns the two buckets a getEntry by payerID of a key of type
// keyType is charged to: the payer's USER anti-scan bucket (the _V2 policy
// for CPF, CNPJ and EVP keys) and the participant's
// ENTRIES_READ_PARTICIPANT_ANTISCAN bucket.
func (c *Catalog) LookupKeys(keyType KeyType, payerID, participant string) []throttle.Key {
	return []throttle.Key{
		c.Key(userPolicyFor(keyType), payerID),
		c.Key(PolicyEntriesReadParticipantAntiscan, participant),
	}
}
