package sifen

import (
	"fmt"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// OutcomeStatus says how a send ended. Every status but OutcomeUnknown
// leaves the documents in a state that says so; see each constant.
type OutcomeStatus string

const (
	// OutcomeSent: SIFEN queued the lot (0300). The documents are "sent"
	// and Outcome.LotNumber is set.
	OutcomeSent OutcomeStatus = "sent"
	// OutcomeNotQueued: SIFEN answered without queuing the lot (0301 or
	// another code, or a SOAP fault). The documents are "error" and may be
	// sent again; after a 0301 the RUC is blocked locally for
	// SenderConfig.RemoteBlock.
	OutcomeNotQueued OutcomeStatus = "not_queued"
	// OutcomeBlocked: the throttle refused the send; nothing left. The
	// documents are "error" with the wait in their message and RetryAt, and
	// Outcome.Blocked has the reason and the exact wait. It is the seed's
	// "ThrottleBlocked" with "wait_seconds".
	OutcomeBlocked OutcomeStatus = "blocked"
	// OutcomeFailed: the request never reached SIFEN (the connection could
	// not be made). The documents are "error" and may be sent again.
	OutcomeFailed OutcomeStatus = "failed"
	// OutcomeUnknown: the request may have reached SIFEN but no answer came
	// back. The documents stay "sending" until Sender.Resolve asks SIFEN
	// what it has; they cannot be sent again before that.
	OutcomeUnknown OutcomeStatus = "unknown"
)

// Outcome is the result of Sender.Send. A refusal by the throttle is an
// Outcome (OutcomeBlocked), not an error.
type Outcome struct {
	Status OutcomeStatus
	// DocumentIDs are the documents of the lot, in id order.
	DocumentIDs []int64
	Env         Env
	RUC         RUC
	// LotHash is the lot's identity (Packed.Hash).
	LotHash string
	// Code and Message are SIFEN's dCodRes and dMsgRes when it answered;
	// otherwise Message describes what happened.
	Code, Message string
	// LotNumber is SIFEN's dProtConsLote when the lot was queued.
	LotNumber string
	// ProcessedAt is SIFEN's dFecProc (zero when absent).
	ProcessedAt time.Time
	// Blocked is set when Status is OutcomeBlocked, and Decision is the
	// refusal itself (docs/decisions/0010: a refusal is a value carrying
	// the Decision). A refusal by the RUC's gate (the interval since the
	// previous lot's answer, a lot still on the wire, a block after 0301)
	// is a Decision with ReasonCooldown or ReasonBlocked on RecepcionKey.
	Blocked  *Blocked
	Decision *throttle.Decision
}

// Blocked is a throttle refusal: why, for how long, and which bucket.
type Blocked struct {
	// Reason is throttle.ReasonCooldown (the minimum interval since the
	// RUC's last lot), throttle.ReasonEmpty (the per-minute cap) or
	// throttle.ReasonBlocked (SIFEN blocked the RUC, or the lot's first
	// query is not due yet).
	Reason throttle.Reason
	// Wait is the exact time until the same send would be admitted.
	Wait time.Duration
	// Until is the instant the wait ends.
	Until time.Time
	// Key is the bucket that refused.
	Key throttle.Key
}

// WaitSeconds is Wait in whole seconds, rounded up (the seed's wait_seconds).
func (b *Blocked) WaitSeconds() int64 {
	return int64((b.Wait + time.Second - 1) / time.Second)
}

// Message renders the refusal for a person and for the document's message,
// e.g. "blocked: cooldown, wait 7 s".
func (b *Blocked) Message() string {
	return fmt.Sprintf("blocked: %s, wait %d s", b.Reason, b.WaitSeconds())
}

func newBlocked(d throttle.Decision, now time.Time) *Blocked {
	return &Blocked{Reason: d.Reason, Wait: d.RetryAfter, Until: now.Add(d.RetryAfter), Key: d.Key}
}

// LotOutcome is the result of Sender.QueryLot.
type LotOutcome struct {
	Env       Env
	LotNumber string
	// Blocked and Decision are set when the throttle refused the query
	// (nothing was asked).
	Blocked  *Blocked
	Decision *throttle.Decision
	// Code and Message are SIFEN's dCodResLot and dMsgResLot.
	Code, Message string
	// Results are the per-DE results of a processed lot (CodeLotDone).
	Results []DEResult
	// Updated counts the documents whose status changed.
	Updated int
}

// Resolved is what Sender.Resolve learned about one document left in
// "sending".
type Resolved struct {
	DocumentID int64
	CDC        string
	// Code is SIFEN's answer to siConsDE (CodeDEFound, CodeDENotFound).
	Code string
	// Status is the document's new status: approved when SIFEN has it,
	// draft when it does not (definitively), sending while SIFEN's 0420 is
	// not definitive yet.
	Status Status
}
