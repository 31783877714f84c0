package sifen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/balde-throttle/balde/throttle"
)

// Resolve settles the documents a crashed or unanswered send left in
// "sending", before anything can send them again: for each one whose claim
// is older than ResolveAfter it asks SIFEN by CDC (siConsDE). Found (0422):
// the document is approved. Not found (0420): it goes back to draft, and
// may be sent again. Any other answer, or no answer, leaves it in
// "sending" and is reported in the error, so Resolve can simply be run
// again. Call it when a process starts, and from time to time.
//
// A claim younger than ResolveAfter may belong to a send still running in
// another process, and is left alone. Several processes may run Resolve at
// once: each document is settled once (conditional on its claim).
func (s *Sender) Resolve(ctx context.Context) ([]Resolved, error) {
	rows, err := s.docs.stale(ctx, s.clock().Add(-s.cfg.ResolveAfter))
	if err != nil {
		return nil, err
	}
	var out []Resolved
	var errs []error
	for _, r := range rows {
		env := Env(r.Env)
		resp, err := s.client.ConsultaDE(ctx, env, r.CDC)
		if err != nil {
			errs = append(errs, fmt.Errorf("document %d: %w", r.ID, err))
			continue
		}
		var st settle
		switch resp.Code {
		case CodeDEFound:
			st = settle{status: StatusApproved, responseCode: resp.Code,
				message: "found at SIFEN after a send without answer: " + resp.Code + " " + resp.Message}
		case CodeDENotFound:
			st = settle{status: StatusDraft, responseCode: resp.Code,
				message: "not at SIFEN after a send without answer (" + resp.Code + " " + resp.Message + "): it may be sent again"}
		default:
			errs = append(errs, fmt.Errorf("%w: document %d: siConsDE answered %s %s", ErrRemote, r.ID, resp.Code, resp.Message))
			continue
		}
		n, err := s.docs.release(ctx, []int64{r.ID}, r.Claim.String, env, r.LotHash.String, st, s.clock())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if n == 1 {
			out = append(out, Resolved{DocumentID: r.ID, CDC: r.CDC, Code: resp.Code, Status: st.status})
			s.logger.Info("resolved a document left sending", slog.Int64("id", r.ID), slog.String("cdc", r.CDC),
				slog.String("code", resp.Code), slog.String("status", string(st.status)))
		}
	}
	return out, errors.Join(errs...)
}

// QueryLot asks SIFEN for the result of a lot (siResultLoteDE), throttled
// by SIFEN_CONSULTA_LOTE: a refused query is a LotOutcome with Blocked set
// (the first query is due ConsultaInterval after the send, and each next
// one ConsultaInterval after the previous). A processed lot (0362) moves its
// documents from "sent" to approved or rejected. A lot SIFEN does not know
// (0360) or no longer answers for (0364) is settled document by document
// with siConsDE: found → approved, not found → error (may be sent again).
// A lot in processing (0361) changes nothing.
//
// Errors: ErrInvalidEnv, ErrInvalidLotNumber, the errors of the Client,
// throttle.ErrStoreUnavailable.
func (s *Sender) QueryLot(ctx context.Context, env Env, lotNumber string) (LotOutcome, error) {
	if err := env.Validate(); err != nil {
		return LotOutcome{}, err
	}
	if err := ValidateLotNumber(lotNumber); err != nil {
		return LotOutcome{}, err
	}
	out := LotOutcome{Env: env, LotNumber: lotNumber}
	d, err := s.limiter.Take(ctx, "lot:"+lotNumber, throttle.Charge{Key: ConsultaKey(env, lotNumber), Cost: 1})
	if err != nil {
		return out, fmt.Errorf("sifen: query lot %s: %w", lotNumber, err)
	}
	if !d.Allowed {
		out.Blocked = newBlocked(d, s.clock())
		return out, nil
	}
	resp, err := s.client.ConsultaLote(ctx, env, lotNumber)
	if err != nil {
		return out, err
	}
	out.Code, out.Message, out.Results = resp.Code, resp.Message, resp.Results
	docs, err := s.docs.lotDocs(ctx, env, lotNumber)
	if err != nil {
		return out, err
	}
	switch resp.Code {
	case CodeLotDone:
		byCDC := make(map[string]DEResult, len(resp.Results))
		for _, r := range resp.Results {
			byCDC[r.CDC] = r
		}
		for _, doc := range docs {
			res, ok := byCDC[doc.CDC]
			if !ok {
				continue
			}
			st := settle{status: StatusRejected, message: resultText(res)}
			if res.Approved() {
				st.status = StatusApproved
			}
			if len(res.Messages) > 0 {
				st.responseCode = res.Messages[0].Code
			}
			ok, err := s.docs.finish(ctx, doc, st, s.clock())
			if err != nil {
				return out, err
			}
			if ok {
				out.Updated++
			}
		}
	case CodeLotUnknown, CodeLotTooLate:
		var errs []error
		for _, doc := range docs {
			r, err := s.client.ConsultaDE(ctx, env, doc.CDC)
			if err != nil {
				errs = append(errs, fmt.Errorf("document %d: %w", doc.ID, err))
				continue
			}
			st := settle{responseCode: r.Code}
			switch r.Code {
			case CodeDEFound:
				st.status, st.message = StatusApproved, "lot "+resp.Code+"; DE found: "+r.Code+" "+r.Message
			case CodeDENotFound:
				st.status, st.message = StatusError, "lot "+resp.Code+" "+resp.Message+"; DE not at SIFEN ("+r.Code+"): it may be sent again"
			default:
				errs = append(errs, fmt.Errorf("%w: document %d: siConsDE answered %s %s", ErrRemote, doc.ID, r.Code, r.Message))
				continue
			}
			ok, err := s.docs.finish(ctx, doc, st, s.clock())
			if err != nil {
				errs = append(errs, err)
			} else if ok {
				out.Updated++
			}
		}
		return out, errors.Join(errs...)
	}
	return out, nil
}

// Poll queries every lot that has documents still "sent" (QueryLot each)
// and returns one LotOutcome per lot, including those the throttle refused.
func (s *Sender) Poll(ctx context.Context) ([]LotOutcome, error) {
	lots, err := s.docs.sentLots(ctx)
	if err != nil {
		return nil, err
	}
	var out []LotOutcome
	var errs []error
	for _, l := range lots {
		o, err := s.QueryLot(ctx, l.Env, l.LotNumber)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, o)
	}
	return out, errors.Join(errs...)
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
