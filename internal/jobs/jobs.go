// Package jobs holds the bodies of balde.Engine.Run's background jobs, each
// logging what it did and a failure (unless ctx ended), and the Turns that
// run a job once per period across processes.
package jobs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// Every runs fn every period, the first one from now, until ctx ends.
func Every(ctx context.Context, every time.Duration, fn func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fn()
	}
}

// LearnCategory sets client's catalog category from the DICT (or the one
// learned within dict.CategoryFresh); only a database failure is an error.
func LearnCategory(ctx context.Context, client *dict.Client, log *slog.Logger) error {
	learned, err := client.LearnCategory(ctx, dict.CategoryFresh)
	switch {
	case errors.Is(err, throttle.ErrStoreUnavailable):
		return err
	case err != nil:
		log.Warn("dict: category not learned from the DICT: the strictest category applies until it is",
			slog.String("category", client.Catalog().Category()), slog.Any("error", err))
	default:
		log.Info("dict: category", slog.String("category", learned.Category), slog.String("source", learned.Source))
	}
	return nil
}

// Reevaluate grades the stored severities again once (Limiter.Reevaluate).
func Reevaluate(ctx context.Context, lim *throttle.Limiter, log *slog.Logger) {
	if n, err := lim.Reevaluate(ctx); err != nil && ctx.Err() == nil {
		log.Warn("severity re-evaluation", slog.Any("error", err))
	} else if n > 0 {
		log.Info("severity re-evaluated", slog.Int("changed", n))
	}
}

// ResolveSifen settles the SIFEN documents left in "sending"
// (sifen.Sender.Resolve); what it cannot settle now stays.
func ResolveSifen(ctx context.Context, sender *sifen.Sender, log *slog.Logger) {
	resolved, err := sender.Resolve(ctx)
	for _, r := range resolved {
		log.Info("SIFEN document settled", slog.Int64("id", r.DocumentID), slog.String("code", r.Code), slog.String("status", string(r.Status)))
	}
	if err != nil && ctx.Err() == nil {
		log.Warn("SIFEN documents left in sending could not all be settled", slog.Any("error", err))
	}
}

// ReportPoll is sifen.Sender.RunPoll's report: the lots queried, the failures.
func ReportPoll(ctx context.Context, log *slog.Logger) func([]sifen.LotOutcome, error) {
	return func(out []sifen.LotOutcome, err error) {
		for _, o := range out {
			if !o.NotDue {
				log.Info("SIFEN lot queried", slog.String("lot", o.LotNumber), slog.String("code", o.Code), slog.Int("updated", o.Updated))
			}
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("SIFEN lot results", slog.Any("error", err))
		}
	}
}

// ReconcileDict reconciles the local DICT buckets with the DICT's GET
// /policies/ once (dict.Client.Reconcile).
func ReconcileDict(ctx context.Context, client *dict.Client, log *slog.Logger) {
	res, err := client.Reconcile(ctx)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			log.Warn("DICT reconciliation failed", slog.Any("error", err))
		}
	case !res.Decision.Allowed:
		log.Info("DICT reconciliation deferred: POLICIES_LIST bucket empty", slog.Duration("retry_after", res.Decision.RetryAfter))
	default:
		log.Info("DICT reconciled", slog.String("category", res.Category),
			slog.Int("lowered", len(res.Lowered)), slog.Int("mismatched", len(res.Mismatched)))
	}
}

// WatchDatabase logs at error level, every period, while store's SQLite
// file is not the one it opened (deleted or replaced).
func WatchDatabase(ctx context.Context, store *sqlstore.Store, every time.Duration, log *slog.Logger) {
	Every(ctx, every, func() {
		if err := store.CheckIdentity(); err != nil {
			log.Error("THE DATABASE FILE WAS DELETED OR REPLACED: writes are going to an unlinked file; stop the process, restore the file, restart",
				slog.String("identity", store.Identity().String()), slog.Any("error", err))
		}
	})
}
