package sifen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Resolve settles documents a crashed or unanswered send left in "sending"
// once their claim is older than ResolveAfter, asking SIFEN by CDC
// (siConsDE): a CDC is sent again only after a definitive answer
// (docs/decisions/0012). 0422: approved, with dProtAut. 0420: draft once
// the claim is older than NotFoundAfter; before, it stays sending with a
// message. Any other answer, or none, leaves it and is in the error. Each
// document is settled once, across processes (conditional on its claim).
func (s *Sender) Resolve(ctx context.Context) ([]Resolved, error) {
	rows, err := s.docs.Stale(ctx, s.clock().Add(-s.cfg.ResolveAfter))
	if err != nil {
		return nil, err
	}
	var out []Resolved
	var errs []error
	for _, r := range rows {
		resp, err := s.askDE(ctx, r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var st Settle
		now := s.clock()
		switch {
		case resp.Code == codeDEFound:
			st = resp.found("found at SIFEN after a send without answer: ")
		case resp.Code == codeDENotFound && now.Sub(r.ClaimedAt) >= s.cfg.NotFoundAfter:
			st = Settle{Status: StatusDraft, ResponseCode: resp.Code,
				Message: fmt.Sprintf("not at SIFEN %s after a send without answer (%s %s): it may be sent again",
					s.cfg.NotFoundAfter, resp.Code, resp.Message)}
		case resp.Code == codeDENotFound:
			until := r.ClaimedAt.Add(s.cfg.NotFoundAfter)
			msg := fmt.Sprintf("SIFEN answered %s (%s), which is not definitive while the lot may be processing: kept unsendable until %s",
				resp.Code, resp.Message, until.Format("2006-01-02 15:04 MST"))
			if err := s.docs.Note(ctx, []int64{r.ID}, r.Claim, msg, now); err != nil {
				errs = append(errs, err)
			}
			out = append(out, Resolved{DocumentID: r.ID, CDC: r.CDC, Code: resp.Code, Status: StatusSending})
			continue
		}
		n, err := s.docs.Release(ctx, Release{IDs: []int64{r.ID}, Token: r.Claim, Env: r.Env, Hash: r.LotHash, St: st, Now: now})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if n == 1 {
			out = append(out, Resolved{DocumentID: r.ID, CDC: r.CDC, Code: resp.Code, Status: st.Status})
			s.logger.Info("resolved a document left sending", slog.Int64("id", r.ID), slog.String("cdc", r.CDC),
				slog.String("code", resp.Code), slog.String("status", string(st.Status)))
		}
	}
	return out, errors.Join(errs...)
}

// QueryLot asks SIFEN for a lot's result (siConsLoteDE) when its query is
// due: ConsultaInterval after the send, then as long between queries. That
// is a schedule, not a limit: a query not due is a LotOutcome with NotDue;
// of processes finding it due at once, one asks (docs/decisions/0170).
// 0362 moves the documents from "sent" to approved or rejected (a result
// balde cannot read leaves one sent, with a message). 0360 and 0364 settle
// each DE by siConsDE: found → approved; not found → error after 0364 or
// once the send is NotFoundAfter old, else still sent (docs/decisions/0012).
// 0361 changes nothing.
//
// Errors: ErrInvalidEnv, ErrInvalidLotNumber, the SOAPServices',
// throttle.ErrStoreUnavailable.
func (s *Sender) QueryLot(ctx context.Context, env Env, lotNumber string) (LotOutcome, error) {
	if err := env.Validate(); err != nil {
		return LotOutcome{}, err
	}
	if err := validateLotNumber(lotNumber); err != nil {
		return LotOutcome{}, err
	}
	lots, err := s.docs.SentLots(ctx)
	if err != nil {
		return LotOutcome{}, err
	}
	if i := slices.IndexFunc(lots, func(l LotRef) bool { return l.Env == env && l.LotNumber == lotNumber }); i >= 0 {
		return s.queryLot(ctx, lots[i])
	}
	// No document of it waits for its result: ask anyway (nothing is due
	// or scheduled for such a lot).
	out := LotOutcome{Env: env, LotNumber: lotNumber}
	return out, s.askLot(ctx, &out)
}

// Lots returns the lots with documents waiting for their result, with their
// next query (see nextQuery).
func (s *Sender) Lots(ctx context.Context) ([]LotRef, error) {
	lots, err := s.docs.SentLots(ctx)
	for i := range lots {
		lots[i].NextQueryAt = s.nextQuery(lots[i])
	}
	return lots, err
}

// nextQuery is l's stored schedule, or ConsultaInterval after its send when
// none was stored.
func (s *Sender) nextQuery(l LotRef) time.Time {
	if !l.NextQueryAt.IsZero() || l.SentAt.IsZero() {
		return l.NextQueryAt
	}
	return l.SentAt.Add(s.cfg.ConsultaInterval)
}

// queryLot queries l when due, once across processes: it claims the lot by
// moving its next query InFlightFor ahead if still due (ScheduleLot), then,
// after the answer or failure, to ConsultaInterval from then. A process that
// lost the claim asks nothing (NotDue); one that dies holding it gives the
// lot back when the claim ends (docs/decisions/0170).
func (s *Sender) queryLot(ctx context.Context, l LotRef) (LotOutcome, error) {
	out := LotOutcome{Env: l.Env, LotNumber: l.LotNumber, NextQueryAt: s.nextQuery(l)}
	now := s.clock()
	if out.NextQueryAt.After(now) {
		out.NotDue, out.Wait = true, out.NextQueryAt.Sub(now)
		return out, nil
	}
	claim := now.Add(s.cfg.InFlightFor)
	won, err := s.docs.ScheduleLot(ctx, l.Env, l.LotNumber, now, claim)
	if err != nil {
		return out, fmt.Errorf("sifen: query lot %s: %w", l.LotNumber, err)
	}
	if !won {
		out.NotDue, out.NextQueryAt, out.Wait, out.elsewhere = true, claim, claim.Sub(now), true
		return out, nil
	}
	err = s.askLot(ctx, &out)
	// The schedule, from the answer: on the claim's condition, so that a
	// claim that ended meanwhile and was taken by another is left to it.
	out.NextQueryAt = s.clock().Add(s.cfg.ConsultaInterval)
	if _, serr := s.docs.ScheduleLot(context.WithoutCancel(ctx), l.Env, l.LotNumber, claim, out.NextQueryAt); serr != nil {
		err = errors.Join(err, fmt.Errorf("sifen: schedule lot %s: %w", l.LotNumber, serr))
	}
	return out, err
}

// askLot asks SIFEN for out's lot and records what it learns on the lot's
// documents (see QueryLot), filling out.
func (s *Sender) askLot(ctx context.Context, out *LotOutcome) error {
	env, lotNumber := out.Env, out.LotNumber
	resp, err := s.client.ConsultaLote(ctx, env, lotNumber)
	if err != nil {
		return err
	}
	out.Code, out.Message, out.Results = resp.Code, resp.Message, resp.Results
	docs, err := s.docs.LotDocuments(ctx, env, lotNumber)
	if err != nil {
		return err
	}
	finish := func(doc Document, st Settle) error {
		ok, err := s.docs.Finish(ctx, doc, st, s.clock())
		if ok && st.Status != StatusSent {
			out.Updated++
		}
		return err
	}
	switch resp.Code {
	case codeLotDone:
		for _, doc := range docs {
			i := slices.IndexFunc(resp.Results, func(r DEResult) bool { return r.CDC == doc.CDC })
			if i < 0 {
				continue
			}
			if st, changes := lotResultSettle(doc, resp.Results[i]); changes {
				if err := finish(doc, st); err != nil {
					return err
				}
			}
		}
	case codeLotUnknown, codeLotTooLate:
		var errs []error
		for _, doc := range docs {
			r, err := s.askDE(ctx, doc)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			st := Settle{Status: StatusError, ResponseCode: r.Code, Message: "lot " + resp.Code + " " + resp.Message + "; DE not at SIFEN (" + r.Code + "): it may be sent again"}
			sent := doc.SentAt
			if sent.IsZero() {
				sent = doc.ClaimedAt // its send not recorded: its claim
			}
			switch {
			case r.Code == codeDEFound:
				st = r.found("lot " + resp.Code + "; DE found: ")
			case resp.Code == codeLotUnknown && s.clock().Sub(sent) < s.cfg.NotFoundAfter:
				// Not definitive: the lot may still be processing.
				st.Status, st.ResponseCode = StatusSent, resp.Code
				st.Message = fmt.Sprintf("SIFEN answered %s (%s) for lot %s and %s for the DE, which is not definitive while the lot may be processing: kept unsendable, its lot queried again, until %s",
					resp.Code, resp.Message, lotNumber, r.Code, sent.Add(s.cfg.NotFoundAfter).Format("2006-01-02 15:04 MST"))
				if st.Message == doc.Message {
					continue
				}
			}
			if err := finish(doc, st); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	return nil
}

// Poll queries every lot with documents still "sent" whose query is due, and
// returns one LotOutcome per lot, those not due included (NotDue). Each pass
// also agrees the interval with the database again (NewSender).
func (s *Sender) Poll(ctx context.Context) ([]LotOutcome, error) {
	var errs []error
	if _, err := s.shareInterval(ctx); err != nil {
		errs = append(errs, err)
	}
	lots, err := s.docs.SentLots(ctx)
	if err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	var out []LotOutcome
	for _, l := range lots {
		o, err := s.queryLot(ctx, l)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, o)
	}
	return out, errors.Join(errs...)
}

// found is the settle of a document whose DE SIFEN has (0422): approved with
// its dProtAut, the message why followed by SIFEN's answer.
func (r ConsultaDEResponse) found(why string) Settle {
	return Settle{Status: StatusApproved, ResponseCode: r.Code, Result: resultApproved, AuthNumber: r.AuthNumber(),
		Message: why + r.Code + " " + r.Message}
}

// askDE asks SIFEN whether it has doc's DE (siConsDE): its answer, 0422 or
// 0420; another is an error wrapping ErrRemote.
func (s *Sender) askDE(ctx context.Context, doc Document) (ConsultaDEResponse, error) {
	r, err := s.client.ConsultaDE(ctx, doc.Env, doc.CDC)
	switch {
	case err != nil:
		return r, fmt.Errorf("document %d: %w", doc.ID, err)
	case r.Code != codeDEFound && r.Code != codeDENotFound:
		return r, fmt.Errorf("%w: document %d: siConsDE answered %s %s", ErrRemote, doc.ID, r.Code, r.Message)
	}
	return r, nil
}

// resultText renders a DE's result: "Aprobado: 0260 Autorización del DE satisfactoria".
func resultText(r DEResult) string {
	parts := make([]string, len(r.Messages))
	for i, m := range r.Messages {
		parts[i] = strings.TrimSpace(m.Code + " " + m.Message)
	}
	if len(parts) == 0 {
		return r.Status
	}
	return r.Status + ": " + strings.Join(parts, "; ")
}

// RunPoll calls Poll every `every` until ctx ends, passing each pass's
// outcomes to report (which may be nil), those of a pass ctx cut short
// included, without the cancellation as an error.
func (s *Sender) RunPoll(ctx context.Context, every time.Duration, report func([]LotOutcome, error)) {
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		out, err := s.Poll(ctx)
		if ctx.Err() != nil {
			err = nil // stopping is no failure of the pass it cut short
		}
		// Reported even when ctx ended: the pass updated those documents.
		if report != nil && (len(out) > 0 || err != nil) {
			report(out, err)
		}
		if ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
