package balde

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
)

// Off, as the period of a job in Jobs, turns the job off.
const Off time.Duration = -1

// Defaults of Jobs.
const (
	// DefaultSifenPollEvery is how often Run looks for SIFEN lots whose
	// result is due (each lot is queried only when its query is due, 10
	// min after the send, then every 10 min: a schedule of the lot, so a
	// short period costs only one read of the lots).
	DefaultSifenPollEvery = 30 * time.Second
	// DefaultSifenResolveEvery is how often Run settles SIFEN documents a
	// crashed or unanswered send left in "sending" (besides once at start).
	DefaultSifenResolveEvery = 10 * time.Minute
	// DefaultSeverityEvery is how often Run grades again the buckets that
	// are not Healthy, so that a bucket refilled while nobody sends gets
	// its recovery (log, webhook "resolved", metric) within this time.
	DefaultSeverityEvery = 15 * time.Second
	// DefaultReconcileEvery is how often Run reconciles the local DICT
	// buckets with a real DICT's GET /policies/ (POLICIES_LIST allows 6 a
	// minute).
	DefaultReconcileEvery = time.Minute
	// DefaultPruneEvery is how often Run applies the retention.
	DefaultPruneEvery = 10 * time.Minute
	// DefaultDatabaseWatchEvery is how often Run checks that a SQLite file
	// is still the one opened.
	DefaultDatabaseWatchEvery = 10 * time.Second
)

// Jobs are the periods of the background work Engine.Run does. A zero
// period is the job's default, Off turns it off; jobs whose part is not
// configured (no Config.Sifen, no Config.Dict) do not run.
type Jobs struct {
	// SifenPollEvery: lot results (sifen.Sender.RunPoll); documents move
	// from sent to approved or rejected. Default DefaultSifenPollEvery.
	SifenPollEvery time.Duration
	// SifenResolveEvery: documents left in "sending" (sifen.Sender.Resolve),
	// also once at start. Default DefaultSifenResolveEvery.
	SifenResolveEvery time.Duration
	// SeverityEvery: stored severities graded again (Limiter.Reevaluate),
	// also once at start. Default DefaultSeverityEvery.
	SeverityEvery time.Duration
	// DictReconcileEvery: the DICT's GET /policies/ lowers the local PSP
	// buckets and gives the category (dict.Client.RunReconcile). Zero is
	// automatic: DefaultReconcileEvery against a real DICT, off against a
	// simulator (DictConfig.Simulator), whose buckets see nothing but this
	// process's traffic. See ReconcilePeriod.
	DictReconcileEvery time.Duration
	// PruneEvery: ledger rows and DICT lookups older than Retention, and
	// idle buckets, removed (Engine.Prune). Default DefaultPruneEvery.
	PruneEvery time.Duration
	// Retention is what PruneEvery keeps; zero: throttle.DefaultRetention.
	Retention time.Duration
	// DatabaseWatchEvery: a SQLite file deleted or replaced under the
	// process is logged at error level at every check (nothing to watch
	// on PostgreSQL or on an application's pool). Default
	// DefaultDatabaseWatchEvery.
	DatabaseWatchEvery time.Duration
}

// period resolves a period of Jobs: zero is def, Off (any negative) is 0.
func period(every, def time.Duration) time.Duration {
	switch {
	case every < 0:
		return 0
	case every == 0:
		return def
	}
	return every
}

// ReconcilePeriod resolves Jobs.DictReconcileEvery: zero is
// DefaultReconcileEvery against a real DICT and 0 (off) against a
// simulator; Off is 0; any other value is used as it is, simulator or not.
func ReconcilePeriod(every time.Duration, simulator bool) time.Duration {
	switch {
	case every < 0:
		return 0
	case every > 0:
		return every
	case simulator:
		return 0
	}
	return DefaultReconcileEvery
}

// Run does the background work of the engine until ctx ends, each job
// with its period from Config.Jobs, logging to Config.Logger:
//
//   - at start, with Config.Dict and its LearnCategory: the participant's
//     category learned from the DICT (a DICT that cannot be asked is
//     logged; the strictest category applies meanwhile);
//   - at start, with Config.Sifen: the documents left in "sending"
//     settled (Resolve);
//   - at start and then every SeverityEvery: severities graded again;
//   - with Config.Sifen: lot results polled (RunPoll) and documents left in
//     "sending" settled (Resolve);
//   - with Config.Dict: reconciliation with the DICT (RunReconcile);
//   - the retention applied (Prune);
//   - a SQLite file deleted or replaced under the process reported.
//
// This is everything balde serve runs in the background. Started is closed
// once the start work is done (a process that must not serve before it
// waits for it). A failure of a job is logged and retried at its next
// period; Run returns an error only when the start work cannot be done
// (the database cannot answer), and nil once ctx ends and
// every job has stopped. Call it once; cancel ctx and wait for Run to
// return before Close.
func (e *Engine) Run(ctx context.Context) error {
	if !e.running.CompareAndSwap(false, true) {
		return errors.New("balde: Engine.Run called twice")
	}
	jobs, log := e.jobs, e.logger
	if e.dict != nil && e.dictLearn {
		if err := e.learnCategory(ctx, e.dict); err != nil {
			return err
		}
	}
	if e.sender != nil {
		// Before anything sends: documents a crashed send left in
		// "sending" are settled by asking SIFEN, or stay (and are logged).
		e.resolveSifen(ctx)
	}
	close(e.started)

	var wg sync.WaitGroup
	if every := period(jobs.SeverityEvery, DefaultSeverityEvery); every > 0 {
		wg.Go(func() {
			// A fresh limiter grades every row again at once: the policies
			// may differ from the last process's (Limiter.Regrade).
			e.reevaluate(ctx)
			everyTick(ctx, every, func() { e.reevaluate(ctx) })
		})
	}
	if e.sender != nil {
		if every := period(jobs.SifenPollEvery, DefaultSifenPollEvery); every > 0 {
			wg.Go(func() { e.sender.RunPoll(ctx, every, e.reportPoll(ctx)) })
		}
		if every := period(jobs.SifenResolveEvery, DefaultSifenResolveEvery); every > 0 {
			wg.Go(func() { everyTick(ctx, every, func() { e.resolveSifen(ctx) }) })
		}
	}
	if e.dict != nil {
		if every := ReconcilePeriod(jobs.DictReconcileEvery, e.dictSimulator); every > 0 {
			log.Info("DICT reconciliation on", slog.Duration("every", every))
			wg.Go(func() { _ = e.dict.RunReconcile(ctx, every, nil) })
		}
	}
	if every := period(jobs.PruneEvery, DefaultPruneEvery); every > 0 {
		wg.Go(func() { everyTick(ctx, every, func() { e.prune(ctx, jobs.Retention) }) })
	}
	if every := period(jobs.DatabaseWatchEvery, DefaultDatabaseWatchEvery); every > 0 {
		wg.Go(func() { e.watchDatabase(ctx, every) })
	}
	<-ctx.Done()
	wg.Wait()
	return nil
}

// Started is closed once Run has done its start work (the SIFEN interval
// shared, documents left in "sending" settled).
func (e *Engine) Started() <-chan struct{} { return e.started }

// reevaluate runs Limiter.Reevaluate once.
func (e *Engine) reevaluate(ctx context.Context) {
	if n, err := e.limiter.Reevaluate(ctx); err != nil && ctx.Err() == nil {
		e.logger.Warn("severity re-evaluation", slog.Any("error", err))
	} else if n > 0 {
		e.logger.Info("severity re-evaluated", slog.Int("changed", n))
	}
}

// resolveSifen settles the SIFEN documents left in "sending" whose claim
// is old enough (sifen.Sender.Resolve); what it cannot settle now (SIFEN
// unreachable) stays, is logged, and is tried again at the next period.
func (e *Engine) resolveSifen(ctx context.Context) {
	resolved, err := e.sender.Resolve(ctx)
	for _, r := range resolved {
		e.logger.Info("SIFEN document settled", slog.Int64("id", r.DocumentID), slog.String("code", r.Code), slog.String("status", string(r.Status)))
	}
	if err != nil && ctx.Err() == nil {
		e.logger.Warn("SIFEN documents left in sending could not all be settled", slog.Any("error", err))
	}
}

// reportPoll logs the lots a poll queried and its failures.
func (e *Engine) reportPoll(ctx context.Context) func([]sifen.LotOutcome, error) {
	return func(out []sifen.LotOutcome, err error) {
		for _, o := range out {
			if !o.NotDue {
				e.logger.Info("SIFEN lot queried", slog.String("lot", o.LotNumber), slog.String("code", o.Code), slog.Int("updated", o.Updated))
			}
		}
		if err != nil && ctx.Err() == nil {
			e.logger.Warn("SIFEN lot results", slog.Any("error", err))
		}
	}
}

// prune applies the retention (Engine.Prune) and logs what went.
func (e *Engine) prune(ctx context.Context, retention time.Duration) {
	res, err := e.Prune(ctx, throttle.PruneOptions{Retention: retention})
	if err != nil && ctx.Err() == nil {
		e.logger.Warn("prune", slog.Any("error", err))
	}
	e.logger.Info("pruned", slog.Int64("ledger_rows", res.LedgerRows), slog.Int64("buckets", res.Buckets), slog.Int64("dict_lookups", res.DictLookups), slog.Int64("audit_rows", res.AuditRows))
}

// watchDatabase checks every period until ctx ends that the store's SQLite
// file is still the one it opened, and logs at error level, at every
// check, while it is not: the file was deleted or replaced under the
// process, whose writes now go to a file nobody will find again.
// Readiness fails meanwhile (CheckHealth checks the same).
func (e *Engine) watchDatabase(ctx context.Context, every time.Duration) {
	everyTick(ctx, every, func() {
		if err := e.store.CheckIdentity(); err != nil {
			e.logger.Error("THE DATABASE FILE WAS DELETED OR REPLACED: writes are going to an unlinked file; stop the process, restore the file, restart",
				slog.String("identity", e.store.Identity().String()), slog.Any("error", err))
		}
	})
}

// everyTick runs fn once every period, the first time one period from now,
// until ctx ends.
func everyTick(ctx context.Context, every time.Duration, fn func()) {
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
