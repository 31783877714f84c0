package sifen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// SendNew sends lot, DEs not stored yet (a gateway's siRecepLoteDE), as one
// lot of env by Send's protocol, storing nothing until the RUC's gate admits
// it (docs/decisions/0166): 1. check, reading only (env, Pack, each DE fit,
// no CDC Import would refuse: *CDCError); 2. the gate (a refusal stores
// nothing: OutcomeBlocked without DocumentIDs); 3. import, all or none, and
// claim; then Send's steps 4 and 5. So a refused lot leaves no document
// behind. Errors are Import's and Send's.
func (s *Sender) SendNew(ctx context.Context, env Env, lot Lote) (LotSend, error) {
	c, err := s.admitNew(ctx, env, lot)
	if err != nil || c.out.Status == OutcomeBlocked {
		return c.out, err
	}
	return s.sendLot(c)
}

// SendNewDE sends one DE by the synchronous siRecepDE through the RUC's gate
// as a lot of one (SendNew's checks and protocol), so the interval runs from
// the previous answer whichever service carried it (docs/decisions/0120).
// SIFEN's answer, approved or rejected, is recorded at once. Errors are
// SendNew's, and ErrNoRecepcionDE when the client is no deReceiver.
func (s *Sender) SendNewDE(ctx context.Context, env Env, de DE) (DESend, error) {
	recv, ok := s.client.(deReceiver)
	if !ok {
		return DESend{}, ErrNoRecepcionDE
	}
	c, err := s.admitNew(ctx, env, Lote{DEs: []DE{de}})
	if err != nil || c.out.Status == OutcomeBlocked {
		return DESend{LotSend: c.out}, err
	}
	return s.sendDE(recv, c)
}

// admitNew runs steps 1 to 3 of SendNew.
func (s *Sender) admitNew(ctx context.Context, env Env, lot Lote) (claimed, error) {
	if err := env.Validate(); err != nil {
		return claimed{}, err
	}
	// 1. Check.
	for i, de := range lot.DEs {
		if err := checkFit(env, de, s.cfg.AllowUnsigned); err != nil {
			return claimed{}, fmt.Errorf("DE %d (%s): %w", i+1, de.CDC, err)
		}
	}
	packed, err := lot.Pack()
	if err != nil {
		return claimed{}, err
	}
	if err := s.checkCDCs(ctx, env, lot.DEs); err != nil {
		return claimed{}, err
	}
	// 2. The RUC's gate, then 3. import and claim. Nobody else can claim the
	// new drafts while the gate holds the RUC, but a send refused by it
	// records its wait on them (a new version): the claim reads them again.
	return s.admit(ctx, claimed{lot: lot, packed: packed}, env, nil, func(c *claimed, now time.Time) ([]int64, error) {
		ids, err := s.docs.Import(c.bg, env, lot.DEs, false, now)
		if err != nil {
			return nil, err
		}
		ids = slices.Sorted(slices.Values(ids))
		for range 3 {
			var rows []Document
			if rows, err = s.docs.Documents(c.bg, ids, false); err == nil {
				err = s.docs.Claim(c.bg, Claim{Docs: rows, Token: c.token, Lot: c.packed, Env: env, RUC: c.out.RUC, Now: now})
			}
			if !errors.Is(err, ErrNotSendable) {
				break
			}
		}
		if err != nil {
			s.logger.Warn("a lot imported for a send could not be claimed: its documents stay drafts", slog.Any("ids", ids), slog.Any("error", err))
		}
		return ids, err
	})
}

// checkCDCs refuses (*CDCError) a DE whose CDC a document of env holds that
// Import would not give it to, reading only.
func (s *Sender) checkCDCs(ctx context.Context, env Env, des []DE) error {
	cdcs := make([]string, len(des))
	for i, de := range des {
		cdcs[i] = de.CDC
	}
	held, err := s.docs.List(ctx, Filter{Env: env, CDCs: cdcs, Limit: len(cdcs)})
	if err != nil || len(held) == 0 {
		return err
	}
	ids := make([]int64, len(held))
	for i, d := range held {
		ids[i] = d.ID
	}
	stored, err := s.docs.Documents(ctx, ids, true)
	if err != nil {
		return err
	}
	for _, de := range des {
		if i := slices.IndexFunc(stored, func(d Document) bool { return d.CDC == de.CDC }); i >= 0 {
			if err := CheckReimport(stored[i], de, false, s.clock()); err != nil {
				return err
			}
		}
	}
	return nil
}
