package sifen

import (
	"fmt"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// LotSendStatus says how the send of one lot ended. Every status but
// OutcomeUnknown leaves the documents in a state that says so; see each
// constant.
type LotSendStatus string

const (
	// OutcomeSent: SIFEN queued the lot (0300). The documents are "sent"
	// and LotSend.LotNumber is set.
	OutcomeSent LotSendStatus = "sent"
	// OutcomeNotQueued: SIFEN answered without queuing the lot (0301 or
	// another code, or a SOAP fault). The documents are "error" and may be
	// sent again; after a 0301 the RUC is blocked locally, longer for each
	// 0301 in a row.
	OutcomeNotQueued LotSendStatus = "not_queued"
	// OutcomeBlocked: the RUC's gate (its SIFEN_RECEPCION_LOTE bucket)
	// refused the send; nothing left. The documents keep their status, with
	// the wait in their message and RetryAt, and LotSend.Decision has the
	// reason and the exact wait. A caller shows it as
	// "blocked, retry in N s".
	OutcomeBlocked LotSendStatus = "blocked"
	// OutcomeFailed: the request never reached SIFEN (the connection could
	// not be made). The documents are "error" and may be sent again.
	OutcomeFailed LotSendStatus = "failed"
	// OutcomeUnknown: the request may have reached SIFEN but no answer came
	// back. The documents stay "sending" until Sender.Resolve asks SIFEN
	// what it has; they cannot be sent again before that.
	OutcomeUnknown LotSendStatus = "unknown"
)

// LotSend is how the send of one lot ended: the result of Sender.Send. A
// refusal by the RUC's gate is a LotSend (OutcomeBlocked), not an error.
type LotSend struct {
	Status LotSendStatus
	// DocumentIDs are the documents of the lot, in id order.
	DocumentIDs []int64
	Env         Env
	RUC         RUC
	// LotHash is the lot's identity (packedLot.Hash).
	LotHash string
	// Code and Message are SIFEN's dCodRes and dMsgRes when it answered;
	// otherwise Message describes what happened.
	Code, Message string
	// LotNumber is SIFEN's dProtConsLote when the lot was queued.
	LotNumber string
	// ProcessedAt is SIFEN's dFecProc (zero when absent).
	ProcessedAt time.Time
	// Decision is the refusal when Status is OutcomeBlocked (nil
	// otherwise): ReasonCooldown or ReasonBlocked on RecepcionKey, with
	// the exact RetryAfter (docs/decisions/0010: a refusal is a value
	// carrying the Decision). DecidedAt is when it was decided.
	Decision  *throttle.Decision
	DecidedAt time.Time
}

// Blocked is the refusal in Decision as a wait that ends at an instant, or
// nil when the send was not refused.
func (o LotSend) Blocked() *Blocked {
	if o.Decision == nil || o.Decision.Allowed {
		return nil
	}
	return newBlocked(*o.Decision, o.DecidedAt)
}

// Blocked is a refusal seen as a wait: why, for how long, until when, and
// which bucket. It is derived from a throttle.Decision (LotSend.Blocked).
type Blocked struct {
	// Reason is throttle.ReasonCooldown (the interval since the answer to
	// the RUC's last lot, or a lot of it still on the wire),
	// throttle.ReasonEmpty (the per-minute cap) or throttle.ReasonBlocked
	// (the local block after SIFEN's 0301).
	Reason throttle.Reason
	// Wait is the exact time until the same send would be admitted.
	Wait time.Duration
	// Until is the instant the wait ends.
	Until time.Time
	// Key is the bucket that refused.
	Key throttle.Key
}

// WaitSeconds is Wait in whole seconds, rounded up.
func (b *Blocked) WaitSeconds() int64 {
	return int64((b.Wait + time.Second - 1) / time.Second)
}

// message renders the refusal for a person and for the document's message,
// e.g. "blocked: cooldown, wait 7 s".
func (b *Blocked) message() string {
	return fmt.Sprintf("blocked: %s, wait %d s", b.Reason, b.WaitSeconds())
}

func newBlocked(d throttle.Decision, now time.Time) *Blocked {
	return &Blocked{Reason: d.Reason, Wait: d.RetryAfter, Until: now.Add(d.RetryAfter), Key: d.Key}
}

// LotOutcome is the result of Sender.QueryLot.
type LotOutcome struct {
	Env       Env
	LotNumber string
	// NotDue is set when the lot's next query is not due yet (NextQueryAt
	// is in the future): nothing was asked. A lot's queries are a schedule
	// (ConsultaInterval after the send, then after each query), not a
	// limit: waiting for it is no refusal.
	NotDue bool
	// NextQueryAt is when the lot is to be queried next, and Wait, when
	// NotDue, the time from now until then.
	NextQueryAt time.Time
	Wait        time.Duration
	// Code and Message are SIFEN's dCodResLot and dMsgResLot.
	Code, Message string
	// Results are the per-DE results of a processed lot ("0362").
	Results []DEResult
	// Updated counts the documents whose status changed.
	Updated int
	// elsewhere: the query fell due and another process claimed it; its
	// answer reaches the documents from there, soon.
	elsewhere bool
}

// Resolved is what Sender.Resolve learned about one document left in
// "sending".
type Resolved struct {
	DocumentID int64
	CDC        string
	// Code is SIFEN's answer to siConsDE ("0422", "0420").
	Code string
	// Status is the document's new status: approved when SIFEN has it,
	// draft when it does not (definitively), sending while SIFEN's 0420 is
	// not definitive yet.
	Status Status
}
