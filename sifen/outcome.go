package sifen

import (
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// LotSendStatus says how the send of one lot ended; every status but
// OutcomeUnknown leaves the documents in a state that says so.
type LotSendStatus string

const (
	// OutcomeSent: SIFEN queued the lot (0300): the documents are "sent", with
	// LotSend.LotNumber.
	OutcomeSent LotSendStatus = "sent"
	// OutcomeNotQueued: SIFEN answered without queuing the lot (0301, another
	// code or a SOAP fault): the documents are "error"; a 0301 also blocks the
	// RUC locally, longer for each in a row.
	OutcomeNotQueued LotSendStatus = "not_queued"
	// OutcomeBlocked: the RUC's gate refused the send, nothing left; the
	// documents keep their status with the wait, and LotSend.Decision has the
	// reason and the exact wait.
	OutcomeBlocked LotSendStatus = "blocked"
	// OutcomeFailed: the request never reached SIFEN: the documents are "error".
	OutcomeFailed LotSendStatus = "failed"
	// OutcomeUnknown: no answer came back: the documents stay "sending", not
	// sendable until Sender.Resolve asks SIFEN.
	OutcomeUnknown LotSendStatus = "unknown"
)

// LotSend is how the send of one lot ended (Sender.Send); a refusal by the
// RUC's gate is one (OutcomeBlocked), not an error.
type LotSend struct {
	Status LotSendStatus
	// DocumentIDs are the lot's documents in id order; LotHash its identity.
	DocumentIDs []int64
	Env         Env
	RUC         RUC
	LotHash     string
	// Code and Message are SIFEN's dCodRes and dMsgRes when it answered, else
	// Message says what happened; LotNumber is dProtConsLote once queued and
	// ProcessedAt dFecProc (zero when absent).
	Code, Message string
	LotNumber     string
	ProcessedAt   time.Time
	// Decision is the refusal when OutcomeBlocked, else nil (a refusal is a
	// value, docs/decisions/0010); DecidedAt when it was decided.
	Decision  *throttle.Decision
	DecidedAt time.Time
}

// Blocked is the refusal in Decision as a wait ending at an instant, or nil.
func (o LotSend) Blocked() *Blocked {
	if o.Decision == nil || o.Decision.Allowed {
		return nil
	}
	d := o.Decision
	return &Blocked{Reason: d.Reason, Wait: d.RetryAfter, Until: o.DecidedAt.Add(d.RetryAfter), Key: d.Key}
}

// Blocked is a refusal seen as a wait: why, how long, until when, and the
// bucket (Key) that refused.
type Blocked struct {
	// Reason is throttle.ReasonCooldown (the interval, or a lot on the wire),
	// throttle.ReasonEmpty (the per-minute cap) or throttle.ReasonBlocked (the
	// local block after 0301). Wait is the exact time until the same send would
	// be admitted, and Until the instant it ends.
	Reason throttle.Reason
	Wait   time.Duration
	Until  time.Time
	Key    throttle.Key
}

// WaitSeconds is Wait in whole seconds, rounded up.
func (b *Blocked) WaitSeconds() int64 {
	return int64((b.Wait + time.Second - 1) / time.Second)
}

// LotOutcome is the result of Sender.QueryLot.
type LotOutcome struct {
	Env       Env
	LotNumber string
	// NotDue: the lot's next query is not due yet (queries are a schedule, not
	// a limit), nothing was asked. NextQueryAt is when it is due, Wait, when
	// NotDue, the time until then.
	NotDue      bool
	NextQueryAt time.Time
	Wait        time.Duration
	// Code and Message are SIFEN's dCodResLot and dMsgResLot.
	Code, Message string
	// Results are the per-DE results of a processed lot (0362); Updated counts
	// the documents whose status changed.
	Results []DEResult
	Updated int
	// elsewhere: another process claimed the due query; its answer follows.
	elsewhere bool
}

// Resolved is what Sender.Resolve learned about one document left sending.
type Resolved struct {
	DocumentID int64
	CDC        string
	// Code is siConsDE's answer; Status the new status: approved (0422), draft
	// (a definitive 0420), sending while a 0420 is not definitive yet.
	Code   string
	Status Status
}
