package throttle

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// LedgerReason says why the tokens of a bucket changed (or, for refusals,
// why they did not).
type LedgerReason uint8

// The stored codes are part of the database schema: append, never renumber.
const (
	// LedgerTake is the charge of an admitted request.
	LedgerTake LedgerReason = 1
	// LedgerPenalty is an extra charge once the outcome is known (a DICT 404).
	LedgerPenalty LedgerReason = 2
	// LedgerRefund gives back a charge the outcome did not warrant (a 500).
	LedgerRefund LedgerReason = 3
	// LedgerCredit rewards a legitimate outcome (a payment after a lookup);
	// it is applied once per (bucket, reference).
	LedgerCredit LedgerReason = 4
	// LedgerReset is an operator filling the bucket; the reference names them.
	LedgerReset LedgerReason = 5
	// LedgerRefusedEmpty, LedgerRefusedCooldown and LedgerRefusedBlocked
	// record a refused request (delta 0) and its reason.
	LedgerRefusedEmpty    LedgerReason = 6
	LedgerRefusedCooldown LedgerReason = 7
	LedgerRefusedBlocked  LedgerReason = 8
	// LedgerSync lowers the mirror to what the remote side reports (a remote
	// 429 or a reconciliation).
	LedgerSync LedgerReason = 9
	// Code 10 is the store's row of a minute of aggregated takes.

	// ledgerShadowEmpty, LedgerShadowCooldown and LedgerShadowBlocked
	// record a request a policy in shadow mode would have refused, and
	// why, and admitted (delta 0): see Config.Shadow.
	ledgerShadowEmpty    LedgerReason = 11
	LedgerShadowCooldown LedgerReason = 12
	LedgerShadowBlocked  LedgerReason = 13
	// ledgerLease is a quota lease: tokens a process spent at once to
	// admit its next requests on the key from memory (Config.Lease);
	// LedgerLeaseReturn gives back what the lease did not use.
	ledgerLease       LedgerReason = 14
	ledgerLeaseReturn LedgerReason = 15
)

// RefusalReasons are the ledger reasons of refused requests, in Reason
// order.
var RefusalReasons = []LedgerReason{LedgerRefusedEmpty, LedgerRefusedCooldown, LedgerRefusedBlocked}

// ShadowReasons are the ledger reasons of would-be refusals of policies in
// shadow mode (the requests were admitted).
var ShadowReasons = []LedgerReason{ledgerShadowEmpty, LedgerShadowCooldown, LedgerShadowBlocked}

var ledgerReasonNames = map[LedgerReason]string{
	LedgerTake:            "take",
	LedgerPenalty:         "penalty",
	LedgerRefund:          "refund",
	LedgerCredit:          "credit",
	LedgerReset:           "reset",
	LedgerRefusedEmpty:    "refused-empty",
	LedgerRefusedCooldown: "refused-cooldown",
	LedgerRefusedBlocked:  "refused-blocked",
	LedgerSync:            "sync",
	ledgerShadowEmpty:     "shadow-empty",
	LedgerShadowCooldown:  "shadow-cooldown",
	LedgerShadowBlocked:   "shadow-blocked",
	ledgerLease:           "lease",
	ledgerLeaseReturn:     "lease-return",
}

// String returns the lowercase name ("take", "penalty", ...).
func (r LedgerReason) String() string {
	if s, ok := ledgerReasonNames[r]; ok {
		return s
	}
	return fmt.Sprintf("LedgerReason(%d)", uint8(r))
}

// LedgerEntry is one row of the token ledger: a change of a bucket's balance
// (or a refusal) with its cause. Replaying a bucket's entries in order, with
// the policy's refill between them, reproduces its balance.
type LedgerEntry struct {
	// ID orders entries; it is assigned by the store (0 before insertion).
	ID  int64
	Key Key
	At  time.Time
	// Delta is the change in whole tokens actually applied (a credit capped
	// at capacity records what it really added).
	Delta int64
	// Balance is the bucket's whole tokens right after the change.
	Balance int64
	Reason  LedgerReason
	// Ref is the caller's reference: an EndToEndId, a document id, the admin
	// who reset the bucket. May be empty.
	Ref string
	// Count is the number of events in the row: 1, or more when routine
	// takes are aggregated per bucket and minute (LedgerAggregateTakes).
	Count int64
}

// LedgerGranularity says how routine takes are written to the ledger: for
// a whole Limiter (Config.Ledger) or for one policy (Policy.Ledger, which
// overrides the Limiter's). Penalties, refunds, credits, resets, refusals
// and syncs are always written (see Tx.recordRefusals for what one refusal
// row holds).
type LedgerGranularity uint8

const (
	// ledgerDefault is the zero value: for a Policy, the Limiter's
	// granularity; for a Limiter, LedgerEveryTake.
	ledgerDefault LedgerGranularity = iota
	// LedgerEveryTake writes one row per take: exact replay, most disk.
	LedgerEveryTake
	// LedgerAggregateTakes folds the takes of one bucket within one minute
	// into a single row (Count events, summed Delta, last Balance).
	LedgerAggregateTakes
	// LedgerNoTakes writes no row for takes (the bucket row still changes).
	LedgerNoTakes
)

// granularityNames are the names of LedgerEveryTake and the ones after it.
var granularityNames = []string{"every", "minute", "none"}

// ParseLedgerGranularity accepts "every" (or ""), "minute" and "none".
func ParseLedgerGranularity(s string) (LedgerGranularity, error) {
	if i := slices.Index(granularityNames, cmp.Or(s, "every")); i >= 0 {
		return LedgerEveryTake + LedgerGranularity(i), nil
	}
	return 0, fmt.Errorf("throttle: ledger granularity %q (want every, minute or none)", s)
}

// String returns "every" (also for LedgerDefault), "minute" or "none".
func (g LedgerGranularity) String() string {
	if g == ledgerDefault || g > LedgerNoTakes {
		return "every"
	}
	return granularityNames[g-LedgerEveryTake]
}
