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
// itself, or a throttle.Resolvers chain holding it). The client uses a Meter
// on the local mirror, the simulator one on its own store: the same rules on
// both sides of the wire.
type Meter struct {
	Limiter *throttle.Limiter
	Catalog *Catalog
}

// Reservation is what Reserve took: Reserved[i] tokens from Keys[i].
type Reservation struct {
	Op       string
	Ref      string
	Keys     []throttle.Key
	Reserved []int64
	Decision throttle.Decision
}

// Outcome names an HTTP status as an outcome of the counting rules ("404").
func Outcome(status int) string { return strconv.Itoa(status) }

// Reserve takes each key's reserve (1 token for every DICT policy) in one
// all-or-nothing Limiter.Take; ref goes to the ledger (the EndToEndId of a
// lookup). When refused it returns the Reservation with its Decision and a
// *RefusedError, and nothing was taken.
//
// Errors: bad keys (throttle.ErrInvalidKey, throttle.ErrUnknownPolicy),
// throttle.ErrStoreUnavailable, *RefusedError.
func (m *Meter) Reserve(ctx context.Context, op, ref string, keys ...throttle.Key) (Reservation, error) {
	r := Reservation{Op: op, Ref: ref, Keys: keys, Reserved: make([]int64, len(keys))}
	charges := make([]throttle.Charge, len(keys))
	for i, k := range keys {
		n, err := m.Catalog.Reserve(k)
		if err != nil {
			return r, err
		}
		r.Reserved[i] = n
		charges[i] = throttle.Charge{Key: k, Cost: n}
	}
	d, err := m.Limiter.Take(ctx, ref, charges...)
	if err != nil {
		return r, fmt.Errorf("dict: %s: %w", op, err)
	}
	r.Decision = d
	if !d.Allowed {
		return r, &RefusedError{Op: op, Decision: d}
	}
	return r, nil
}

// Settle charges the difference between each key's cost for outcome and its
// reserve, in one Limiter.Adjust: a penalty when the outcome costs more (a
// getEntry 404: 19 more tokens from the payer, 2 more from the participant),
// a refund when it costs less (a 500: the reserve comes back). It returns
// one Adjusted per key that changed.
func (m *Meter) Settle(ctx context.Context, r Reservation, outcome string) ([]throttle.Adjusted, error) {
	var adjs []throttle.Adjustment
	for i, k := range r.Keys {
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
	if len(adjs) == 0 {
		return nil, nil
	}
	out, err := m.Limiter.Adjust(ctx, adjs...)
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
