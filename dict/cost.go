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

// Meter applies the catalog's counting rules to a Limiter: Reserve before a
// request, Settle once its outcome is known, Credit for a later event (a
// payment). The Limiter must resolve the catalog's policies (the Catalog
// itself, or a throttle.Resolvers chain holding it). Client and Transport
// use a Meter on the local mirror. The simulator (dictsim) does not: it
// counts with its own buckets and policy table, written independently from
// the DICT manual, so that it can disagree with these rules when they are wrong.
type Meter struct {
	Limiter *throttle.Limiter
	Catalog *Catalog
	// holds, when set, counts the tokens held by this process's requests in
	// flight (Reserve adds, Settle removes), so that a sync to the DICT's
	// state can leave them out (see holds). NewClient sets one; a nil holds
	// counts nothing and syncs take the DICT's number as it is.
	holds *holds
}

// reservation is what Reserve took: Reserved[i] tokens from Keys[i] (the
// worst-case cost of the request to that bucket). Decision is the limiter's
// answer: when it is a refusal nothing was taken.
type reservation struct {
	Op       string
	Ref      string
	Keys     []throttle.Key
	Reserved []int64
	Decision throttle.Decision
	// flight is the entry in the Meter's holds while the request is in flight.
	flight *flight
	// takenAt is the mirror's time before the take; fullAtTake[i] is set
	// when Keys[i]'s bucket was full when the hold was taken (see
	// flightRefill).
	takenAt    time.Time
	fullAtTake []bool
}

// holds counts, per bucket, the tokens held by requests of this process that
// are in flight: admitted (their worst case taken) and not yet settled. A
// sync to a balance the DICT reports leaves them out — the synced balance is
// the DICT's minus what is held in flight — so that the refunds that follow
// land where the DICT will be once it has charged those requests, not above
// it. Requests in flight in other processes sharing the database are not
// counted (decision 0067). The zero value is ready; safe for concurrent use.
type holds struct {
	mu   sync.Mutex
	held map[throttle.Key]int64
	// watches are the Watches not yet stopped: each counts the holds that
	// land while it runs.
	watches map[*watch]struct{}
}

// watch counts the requests that land between holds.watch and stop. A
// balance the DICT read in that time may or may not count those requests
// (the DICT charges as it answers): a sync to it leaves out what the mirror
// kept of each (its settled cost; the whole hold when the outcome is
// unknown), or a listing read before a lookup's charge and applied after
// its refund would lift the mirror above the DICT. Use it for one read of
// the DICT.
type watch struct {
	holds  *holds
	landed map[throttle.Key]int64 // under holds.mu
}

// watch starts counting the holds that land; call it before the request
// whose balance will be synced is sent, and Stop once the sync is done.
// A nil holds returns a nil *watch, which counts nothing.
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

// stop ends the count.
func (w *watch) stop() {
	if w == nil {
		return
	}
	w.holds.mu.Lock()
	defer w.holds.mu.Unlock()
	delete(w.holds.watches, w)
}

// held returns the tokens held from key by requests in flight now plus
// what the mirror kept of the requests that landed since the Watch
// started: what a sync of key to a balance the DICT read meanwhile leaves
// out.
func (w *watch) held(key throttle.Key) int64 {
	if w == nil {
		return 0
	}
	w.holds.mu.Lock()
	defer w.holds.mu.Unlock()
	return w.holds.held[key] + w.landed[key]
}

// heldBut is Held without r's own hold (r in flight: a request syncing
// after its own answer leaves the rest out, not itself).
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

// inFlight returns the tokens held from key's bucket by requests in flight.
func (h *holds) inFlight(key throttle.Key) int64 {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held[key]
}

// add counts a request's holds before its take; the entry it returns
// removes them.
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

// done removes f's holds, once (a nil f is nothing), counting each whole
// hold as landed in the running Watches: the DICT may have charged up to it.
func (f *flight) done() { f.land(nil) }

// land removes f's holds, once (a nil f is nothing). kept[i], when kept is
// not nil, is what the settle left charged to keys[i] (the outcome's cost:
// 0 for a 429, 1 for a found lookup's participant); the running Watches
// count that, not the hold: the DICT charged at most what the mirror kept,
// and a balance it read before that charge is above it by no more.
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

// heldBy returns what f still holds from key (0 once removed).
func (f *flight) heldBy(key throttle.Key) int64 {
	if f == nil {
		return 0
	}
	f.holds.mu.Lock()
	defer f.holds.mu.Unlock()
	var n int64
	if !f.removed {
		for i, k := range f.keys {
			if k == key {
				n += f.reserved[i]
			}
		}
	}
	return n
}

// landed reports that r's request is no longer in flight (its answer
// arrived, or it was never sent) once its settle has committed or been given
// up: from then on its outcome is in the mirror's balance, not in holds.
// Settle calls it; call it when a reservation is dropped without one.
func (r reservation) landed() { r.flight.done() }

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
		if p.Name == PolicyPoliciesList {
			tokens = p.AvailableTokens - m.holds.inFlight(key)
		}
		targets = append(targets, throttle.SyncTarget{Key: key, Tokens: tokens, Ref: ref})
	}
	return targets, unknown
}

// inFlightBut returns the tokens held from key by this process's requests
// in flight other than r (see holds): what a sync of key to the DICT's
// balance leaves out.
func (m *Meter) inFlightBut(key throttle.Key, r reservation) int64 {
	return max(m.holds.inFlight(key)-r.flight.heldBy(key), 0)
}

// outcomeOf names an HTTP status as an outcome of the counting rules ("404").
func outcomeOf(status int) string { return strconv.Itoa(status) }

// Reserve takes, in one all-or-nothing Limiter.Take, the worst-case cost of
// the request from each key (Catalog.Hold: 20 from a payer and 3 from the
// participant for a getEntry), admitted while each bucket holds the
// policy's admission (Catalog.Admission, 1 token: the DICT admits while the
// balance is positive). Requests in flight so never overdraw the DICT's
// buckets; the difference comes back at Settle. ref goes to the ledger (the
// EndToEndId of a lookup). While admitted and not settled, the hold counts
// in m.holds. A refusal is the reservation's Decision (Allowed false), with
// a nil error: nothing was taken.
//
// Errors: bad keys (throttle.ErrInvalidKey, throttle.ErrUnknownPolicy),
// throttle.ErrStoreUnavailable.
func (m *Meter) reserve(ctx context.Context, op, ref string, keys ...throttle.Key) (reservation, error) {
	r := reservation{Op: op, Ref: ref, Keys: keys, Reserved: make([]int64, len(keys))}
	charges := make([]throttle.Charge, len(keys))
	for i, k := range keys {
		admit, err := m.Catalog.admission(k)
		if err != nil {
			return r, err
		}
		hold, err := m.Catalog.hold(k)
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

// flightRefill is what the mirror's bucket of key refilled, in whole tokens
// rounded up, between r's take and now, when the bucket refills
// continuously, was full at the take, and the DICT charged the request
// (cost > 0); 0 otherwise. The DICT
// keeps a full bucket full until it charges, at the answer, and refills
// from then; the mirror left full at the take, a flight earlier, and would
// keep that refill as a lead over the DICT (a category G participant at
// 25/min, 50 ms: 0.02 token, enough for the mirror to admit at 1 token
// while the DICT holds 0.98 and answers 429). Settle charges it back
// (decision 0067): the mirror ends under the DICT by less than a token.
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

// Settle gives back the difference between what Reserve held and the cost
// of outcome, in one Limiter.Adjust: a 200 refunds 19 to the payer and 2 to
// the participant, a 404 nothing, a 500 or a 429 the whole hold, and so
// does outcomeNotSent (the request provably never left). A request whose
// answer never arrived (outcomeTransportError) keeps its hold: the DICT may
// have counted it at its worst. A cost above the hold (a policy file may
// make one) is a penalty. It returns one Adjusted per key that changed.
// Once it commits, r is no longer in flight (reservation.Landed); after an
// error the caller retries it or calls r.Landed when it gives up.
func (m *Meter) settle(ctx context.Context, r reservation, outcome string) ([]throttle.Adjusted, error) {
	return m.settleAndSync(ctx, r, outcome)
}

// settleAndSync is Settle, then targets (see throttle.SyncTarget) in the
// same transaction (Limiter.AdjustAndSync): a remote 429 refunds its hold
// and lowers the bucket the DICT says is empty at once, so no other request
// is admitted on the refund in between. It returns the Adjusted of the keys
// that changed, then one per target. A transport error applies only the
// targets. r leaves holds (reservation.Landed) only after the transaction
// commits, so that a sync running meanwhile leaves r's hold out (stricter)
// rather than lifting the mirror with r's refund on top.
func (m *Meter) settleAndSync(ctx context.Context, r reservation, outcome string, targets ...throttle.SyncTarget) ([]throttle.Adjusted, error) {
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

// Credit gives each key the tokens event earns under its policy and class
// (a payment: +1 to a PF payer, +2 to a PJ payer, +1 to the participant),
// capped at capacity and applied at most once per (key, ref): a repeated
// credit comes back with Duplicate set and changes nothing.
//
// Errors: errUnknownOutcome when a key's policy does not credit event (then
// nothing is credited), bad keys, throttle.ErrStoreUnavailable.
func (m *Meter) credit(ctx context.Context, ref, event string, keys ...throttle.Key) ([]throttle.Adjusted, error) {
	adjs := make([]throttle.Adjustment, len(keys))
	for i, k := range keys {
		n, err := m.Catalog.credit(k, event)
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
		c.Key(UserPolicyFor(keyType), payerID),
		c.Key(PolicyEntriesReadParticipantAntiscan, participant),
	}
}
