package sifen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Overridden is what Sender.Override did with a document left in "sending":
// SIFEN's siConsDE answer (Code, Message) and the document's new Status.
type Overridden struct {
	DocumentID    int64
	CDC           string
	Code, Message string
	// Done: SIFEN answered 0420 and the document is a draft again. AuthNumber
	// is a 0422's dProtAut: the document is approved, nothing overridden.
	Done       bool
	AuthNumber string
	Status     Status
}

// Refusal says why nothing was overridden ("" when Done).
func (o Overridden) Refusal() string {
	if o.Done {
		return ""
	}
	return fmt.Sprintf("SIFEN has the DE of document %d (%s %s, dProtAut %s): it is approved, and nothing was overridden",
		o.DocumentID, o.Code, o.Message, o.AuthNumber)
}

// Override makes a document a send without answer left in "sending"
// sendable before NotFoundAfter, on an operator's decision
// (docs/decisions/0210), asking SIFEN by CDC then, as Resolve does: 0420
// makes it a draft (Done; SIFEN may still process the first lot, which the
// caller told the operator); 0422 approves it with its dProtAut (not Done).
//
// Any other answer changes nothing (ErrRemote; none: ErrNoResponse). The
// document must be sending, claimed at least InFlightFor ago, else
// ErrNotSendable; ErrNotFound when none. The RUC's gate is not touched.
func (s *Sender) Override(ctx context.Context, id int64) (Overridden, error) {
	d, err := s.Get(ctx, id)
	if err != nil {
		return Overridden{}, err
	}
	now := s.clock()
	switch {
	case d.Status != StatusSending:
		return Overridden{}, fmt.Errorf("%w: document %d is %s: only a document left in sending by a send without answer waits for SIFEN's 48 hours",
			ErrNotSendable, d.ID, d.Status)
	case now.Sub(d.ClaimedAt) < s.cfg.InFlightFor:
		return Overridden{}, fmt.Errorf("%w: document %d is being sent now (claimed %s ago): try again once its send is %s old",
			ErrNotSendable, d.ID, now.Sub(d.ClaimedAt).Round(time.Second), s.cfg.InFlightFor)
	}
	resp, err := s.askDE(ctx, d)
	switch {
	case err != nil && ctx.Err() == nil && !errors.Is(err, ErrRemote):
		return Overridden{}, fmt.Errorf("%w: %w; nothing was overridden", ErrNoResponse, err)
	case err != nil:
		return Overridden{}, fmt.Errorf("%w; nothing was overridden", err)
	}
	o := Overridden{DocumentID: d.ID, CDC: d.CDC, Code: resp.Code, Message: resp.Message}
	var st Settle
	now = s.clock()
	switch resp.Code {
	case codeDENotFound:
		o.Done, o.Status = true, StatusDraft
		st = Settle{Status: StatusDraft, ResponseCode: resp.Code,
			Message: fmt.Sprintf("sendable again by an operator's override before the %.0f h (the audit trail says who and why): SIFEN answered %s (%s) at %s; if SIFEN still processes the first send, it may get the DE twice",
				s.cfg.NotFoundAfter.Hours(), resp.Code, resp.Message, now.UTC().Format("2006-01-02 15:04 MST"))}
	case codeDEFound:
		st = resp.found("found at SIFEN when an override was asked: ")
		o.AuthNumber, o.Status = st.AuthNumber, StatusApproved
	}
	n, err := s.docs.Release(ctx, Release{IDs: []int64{d.ID}, Token: d.Claim, Env: d.Env, Hash: d.LotHash, St: st, Now: now})
	if err != nil {
		return Overridden{}, err
	}
	if n != 1 {
		return Overridden{}, fmt.Errorf("%w: document %d changed while SIFEN was asked (settled by another process); nothing was overridden", ErrNotSendable, d.ID)
	}
	s.logger.Info("override of a document left sending", slog.Int64("id", d.ID), slog.String("cdc", d.CDC),
		slog.String("code", resp.Code), slog.String("status", string(o.Status)))
	return o, nil
}
