package dict

import (
	"context"
	"fmt"
	"strconv"

	"github.com/balde-throttle/balde/throttle"
)

// Meter applies the catalog's counting rules to a Limiter: Reserve before a
// request, Settle once its outcome is known, Credit for a later event (a
// payment). The Limiter must resolve the catalog's policies (the Catalog
// itself, or a throttle.Resolvers chain holding it). Client and Transport
// use a Meter on the local mirror. The simulator (dictsim) does not: it
// counts with its own buckets and policy table, written independently from
// seed 001, so that it can disagree with these rules when they are wrong.
type Meter struct {
	Limiter *throttle.Limiter
	Catalog *Catalog
}

// Reservation is what Reserve took: Reserved[i] tokens from Keys[i] (the
// worst-case cost of the request to that bucket). Decision is the limiter's
// answer: when it is a refusal nothing was taken.
type Reservation struct {
	Op       string
	Ref      string
	Keys     []throttle.Key
	Reserved []int64
	Decision throttle.Decision
}

// Outcome names an HTTP status as an outcome of the counting rules ("404").
func Outcome(status int) string { return strconv.Itoa(status) }

// Reserve takes, in one all-or-nothing Limiter.Take, the worst-case cost of
// the request from each key (Catalog.Hold: 20 from a payer and 3 from the
// participant for a getEntry), admitted while each bucket holds the
// policy's reserve (1 token: the DICT admits while the balance is
// positive). Requests in flight so never overdraw the DICT's buckets; the
// difference comes back at Settle. ref goes to the ledger (the EndToEndId
// of a lookup). A refusal is the Reservation's Decision (Allowed false),
// with a nil error: nothing was taken.
//
// Errors: bad keys (throttle.ErrInvalidKey, throttle.ErrUnknownPolicy),
// throttle.ErrStoreUnavailable.
func (m *Meter) Reserve(ctx context.Context, op, ref string, keys ...throttle.Key) (Reservation, error) {
	r := Reservation{Op: op, Ref: ref, Keys: keys, Reserved: make([]int64, len(keys))}
	charges := make([]throttle.Charge, len(keys))
	for i, k := range keys {
		admit, err := m.Catalog.Reserve(k)
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
	d, err := m.Limiter.Take(ctx, ref, charges...)
	if err != nil {
		return r, fmt.Errorf("dict: %s: %w", op, err)
	}
	r.Decision = d
	return r, nil
}

// Settle gives back the difference between what Reserve held and the cost
// of outcome, in one Limiter.Adjust: a 200 refunds 19 to the payer and 2 to
// the participant, a 404 nothing, a 500 or a 429 the whole hold. A request
// whose answer never arrived (OutcomeTransportError) keeps its hold: the
// DICT may have counted it at its worst. A cost above the hold (a policy
// file may make one) is a penalty. It returns one Adjusted per key that
// changed.
func (m *Meter) Settle(ctx context.Context, r Reservation, outcome string) ([]throttle.Adjusted, error) {
	return m.SettleAndSync(ctx, r, outcome)
}

// SettleAndSync is Settle, then targets (see throttle.SyncTarget) in the
// same transaction (Limiter.AdjustAndSync): a remote 429 refunds its hold
// and lowers the bucket the DICT says is empty at once, so no other request
// is admitted on the refund in between. It returns the Adjusted of the keys
// that changed, then one per target. A transport error applies only the
// targets.
func (m *Meter) SettleAndSync(ctx context.Context, r Reservation, outcome string, targets ...throttle.SyncTarget) ([]throttle.Adjusted, error) {
	var adjs []throttle.Adjustment
	for i, k := range r.Keys {
		if outcome == OutcomeTransportError {
			break
		}
		cost, err := m.Catalog.Cost(k, outcome)
		if err != nil {
			return nil, err
		}
		switch delta := r.Reserved[i] - cost; {
		case delta < 0:
			adjs = append(adjs, throttle.Adjustment{Key: k, Delta: delta, Reason: throttle.LedgerPenalty, Ref: r.Ref})
		case delta > 0:
			adjs = append(adjs, throttle.Adjustment{Key: k, Delta: delta, Reason: throttle.LedgerRefund, Ref: r.Ref})
		}
	}
	if len(adjs) == 0 && len(targets) == 0 {
		return nil, nil
	}
	out, err := m.Limiter.AdjustAndSync(ctx, adjs, targets)
	if err != nil {
		return nil, fmt.Errorf("dict: settle %s as %s: %w", r.Op, outcome, err)
	}
	return out, nil
}

// Credit gives each key the tokens event earns under its policy and class
// (a payment: +1 to a PF payer, +2 to a PJ payer, +1 to the participant),
// capped at capacity and applied at most once per (key, ref): a repeated
// credit comes back with Duplicate set and changes nothing.
//
// Errors: ErrUnknownOutcome when a key's policy does not credit event (then
// nothing is credited), bad keys, throttle.ErrStoreUnavailable.
func (m *Meter) Credit(ctx context.Context, ref, event string, keys ...throttle.Key) ([]throttle.Adjusted, error) {
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
		c.Key(UserPolicyFor(keyType), payerID),
		c.Key(PolicyEntriesReadParticipantAntiscan, participant),
	}
}
