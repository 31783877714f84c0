package throttle

import (
	"fmt"
	"time"
)

// Reason says why a request was refused. The zero value means it was not.
type Reason uint8

const (
	ReasonNone Reason = iota
	// ReasonEmpty: the bucket holds fewer whole tokens than the cost.
	ReasonEmpty
	// ReasonCooldown: the policy's minimum interval since the last admitted
	// request has not passed.
	ReasonCooldown
	// ReasonBlocked: the key is blocked after an earlier refusal.
	ReasonBlocked
)

// String returns "", "empty", "cooldown" or "blocked".
func (r Reason) String() string {
	return name([]string{"", "empty", "cooldown", "blocked"}, r, "Reason")
}

// name returns names[v], or typ(v) for a value past the table.
func name[T ~uint8](names []string, v T, typ string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, uint8(v))
}

// Charge asks for Cost tokens (>= 1, <= the policy's capacity) from the
// bucket of Key. It is admitted when the bucket holds at least Cost whole
// tokens (or Admit, when set), its cooldown has passed and it is not
// blocked.
type Charge struct {
	Key  Key
	Cost int64
	// Admit, when > 0 (and <= Cost), is the whole tokens the bucket must
	// hold to admit the charge, which still debits the full Cost and so may
	// take the balance below zero: the pessimistic reservation of a remote
	// side that admits while the balance is positive and charges by outcome
	// (docs/decisions/0015-dict-pessimistic-reservation.md). 0 means Cost.
	Admit int64
	// HoldFor, when > 0, makes an admitted charge hold its key: nothing
	// else is admitted on it until the Sync that records its answer ends
	// the hold (SyncTarget.Hold, with BucketDecision.HeldUntil), or for
	// HoldFor at most, the longest the request can be on the wire
	// (Bucket.HeldUntil).
	HoldFor time.Duration
}

// held is the part of c's cost held in flight by a pessimistic
// reservation (Admit below Cost): the tokens the remote side has not
// charged yet. 0 for an ordinary charge.
func (c Charge) held() int64 {
	if c.Admit > 0 && c.Admit < c.Cost {
		return c.Cost
	}
	return 0
}

// need is the whole tokens the bucket must hold to admit c.
func (c Charge) need() int64 {
	if c.Admit > 0 {
		return c.Admit
	}
	return c.Cost
}

// Decision is the answer to a Take. A refusal is a Decision, not an error.
type Decision struct {
	Allowed bool
	// Reason is why the request was refused: the constraint with the longest
	// wait (a block wins a tie, then the cooldown).
	Reason Reason
	// Key is the bucket that decided: when refused, the one with the longest
	// wait; when allowed, the one with the fewest tokens left. Limit,
	// Remaining and ResetAfter describe it, for the RateLimit headers.
	Key Key
	// Limit is the capacity of Key's policy.
	Limit int64
	// Remaining is the whole tokens left in Key's bucket after the decision.
	// It may be negative after a penalty.
	Remaining int64
	// RetryAfter is the exact wait until the same request would be admitted,
	// considering tokens, cooldowns and blocks of every key: 0 when allowed.
	RetryAfter time.Duration
	// ResetAfter is the wait until Key's bucket is full again.
	ResetAfter time.Duration
	// FailOpen is set when the store could not answer and every policy
	// involved fails open: the request was admitted without a bucket.
	FailOpen bool
	// Cached is set on a refusal answered from the limiter's memory of an
	// earlier refusal, without a database round trip. Buckets then holds only
	// the refused key, with its Remaining as of that earlier refusal.
	Cached bool
	// Shadow is set on a request admitted only because every policy that
	// refused it is in shadow mode (Config.Shadow); the refusing Buckets
	// keep their Reason and RetryAfter, and only enforcing policies were
	// charged.
	Shadow bool
	// Buckets has one entry per distinct key charged, in key order.
	Buckets []BucketDecision
}

// BucketDecision is the part of a Decision about one key.
type BucketDecision struct {
	Key    Key
	Policy Policy
	// Cost is what the charge debits (see Charge.Admit for what admission
	// needs).
	Cost       int64
	Reason     Reason
	Remaining  int64
	RetryAfter time.Duration
	ResetAfter time.Duration
	// HeldUntil is, for an admitted Charge with HoldFor, the end of the
	// hold it put on the key; pass it as SyncTarget.Hold with the answer.
	HeldUntil time.Time
	// GradePending is set on an admitted pessimistic reservation whose
	// balance after the take grades worse than before it: severity was
	// graded without the hold, and a settle that costs the whole hold must
	// send a LedgerRefund of 0 so that the balance left is graded.
	GradePending bool
}

// Adjustment changes a bucket's balance after the outcome of a request is
// known. Delta is in whole tokens: negative for LedgerPenalty, positive for
// LedgerRefund and LedgerCredit. A LedgerRefund of 0 changes nothing and
// writes no ledger row; it grades the bucket's balance (the settle of a
// hold whose outcome cost all of it, BucketDecision.GradePending). A credit needs a Ref and is applied at most
// once per (Key, Ref); no change ever takes a bucket above its capacity.
type Adjustment struct {
	Key    Key
	Delta  int64
	Reason LedgerReason
	Ref    string
}

// Adjusted is the result of one Adjustment (or Sync target).
type Adjusted struct {
	Key Key
	// Applied is the change actually made: smaller than asked when a credit
	// hits the capacity, 0 for a repeated credit.
	Applied int64
	// Balance is the whole tokens after the change.
	Balance int64
	// Duplicate is set when a credit with the same reference was already
	// applied to this bucket; nothing changed.
	Duplicate bool
	// BlockLevel and BlockedFor are, for a SyncTarget with Escalate, the
	// key's level after it and the block it set.
	BlockLevel int64
	BlockedFor time.Duration
}

// SyncTarget lowers the mirror to what the remote side reported: the balance
// becomes at most Tokens, and the key is blocked for at least BlockFor
// (a remote Retry-After). It never raises a balance.
type SyncTarget struct {
	Key      Key
	Tokens   int64
	BlockFor time.Duration
	Ref      string
	// Escalate makes BlockFor one step of a block that grows with
	// recurrence: the key's BlockLevel rises by one (starting again at 1
	// when its previous block ended Memory or longer ago) and the key is
	// blocked for BlockFor × level, at most BlockMax (when > 0).
	Escalate         bool
	BlockMax, Memory time.Duration
	// Cooldown, when > 0, records a remote answer after which the key must
	// wait Cooldown: NextAt becomes now + Cooldown (never earlier than it
	// was). Hold, when set, is the hold the answered request put on the key
	// (BucketDecision.HeldUntil): it ends, unless the key is held by
	// another request since.
	Cooldown time.Duration
	Hold     time.Time
}

// SeverityChange is emitted when a decision moves a bucket to another
// severity level; it is delivered to the Notifier after the commit.
type SeverityChange struct {
	Key      Key
	From, To Severity
	Tokens   int64
	Capacity int64
	At       time.Time
}

// Resolved reports whether the change brings the bucket back to Healthy:
// the end of the alert its earlier change started.
func (c SeverityChange) Resolved() bool { return c.To == SeverityHealthy && c.From > SeverityHealthy }
