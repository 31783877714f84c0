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

// Jobs are the periods of the background work Engine.Run does. A zero
// period is the job's default (DefaultJobs), Off turns it off; jobs whose
// part is not configured (no Config.Sifen, no Config.Dict) do not run.
// Resolution, reconciliation and prune run once per period across every
// process on the database, whichever takes the turn (docs/decisions/0171);
// a due lot is queried by the one process that claims it
// (docs/decisions/0170).
type Jobs struct {
	// SifenPollEvery: lot results (sifen.Sender.RunPoll); documents move
	// from sent to approved or rejected. SifenResolveEvery: documents left
	// in "sending" (sifen.Sender.Resolve), also once at start in each
	// process.
	SifenPollEvery, SifenResolveEvery time.Duration
	// SeverityEvery: stored severities graded again (Limiter.Reevaluate),
	// also once at start; and the policies in shadow mode read again
	// (docs/decisions/0200).
	SeverityEvery time.Duration
	// DictReconcileEvery: the DICT's GET /policies/ lowers the local PSP
	// buckets and gives the category (dict.Client.Reconcile). Zero is
	// automatic: the default against a real DICT, off against a simulator
	// (DictConfig.Simulator), whose buckets see nothing but this process's
	// traffic; a period set is used, simulator or not.
	DictReconcileEvery time.Duration
	// PruneEvery: ledger rows and DICT lookups older than Retention, and
	// idle buckets, removed (Engine.Prune).
	PruneEvery time.Duration
	// Retention is what PruneEvery keeps; zero: throttle.DefaultRetention.
	Retention time.Duration
	// DatabaseWatchEvery: a SQLite file deleted or replaced under the
	// process is logged at error level at every check (nothing to watch
	// on PostgreSQL or on an application's pool).
	DatabaseWatchEvery time.Duration
}

// DefaultJobs are the periods a zero period of Jobs stands for.
func DefaultJobs() Jobs {
	return Jobs{
		// A lot is queried only when due (its schedule): a poll is a read.
		SifenPollEvery:    30 * time.Second,
		SifenResolveEvery: 10 * time.Minute,
		// A bucket refilled while nobody sends recovers within this time.
		SeverityEvery: 15 * time.Second,
		// Against a real DICT: POLICIES_LIST allows 6 a minute.
		DictReconcileEvery: time.Minute,
		PruneEvery:         10 * time.Minute,
		Retention:          throttle.DefaultRetention,
		DatabaseWatchEvery: 10 * time.Second,
	}
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

// Run does the background work of the engine, everything balde serve runs
// in the background, until ctx ends; each job has its period from
// Config.Jobs and logs to Config.Logger; the periodic resolution,
// reconciliation and prune take turns with the other processes on the
// database (Jobs). At start: the DICT category
// learned (Config.Dict with LearnCategory; a DICT that cannot be asked is
// logged and the strictest category applies) and the documents a crashed
// send left in "sending" settled (Config.Sifen), then Started is closed. Then: severities graded again (also at once), SIFEN lot results
// polled and "sending" documents settled, the DICT reconciled, the
// retention applied, and a SQLite file deleted or replaced under the
// process reported. A failed job is logged and tried again at its next
// period; Run returns an error only when the start work cannot be done
// (the database cannot answer), and nil once ctx ends and every job has
// stopped. Call it once; let it return before Close.
func (e *Engine) Run(ctx context.Context) error {
	if !e.running.CompareAndSwap(false, true) {
		return errors.New("balde: Engine.Run called twice")
	}
	jobs, def, log := e.jobs, DefaultJobs(), e.logger
	if e.dictConfig.Simulator {
		def.DictReconcileEvery = Off // its buckets see only this process's traffic
	}
	if e.dict != nil && e.dictConfig.LearnCategory {
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
	// job runs fn(period) on a goroutine of its own when on and not Off.
	job := func(on bool, every, def time.Duration, fn func(time.Duration)) {
		if every = period(every, def); on && every > 0 {
			wg.Go(func() { fn(every) })
		}
	}
	// Jobs with a remote effect or shared rows run once per period across
	// the processes on the database (docs/decisions/0171); a due lot is
	// claimed by the process that queries it (docs/decisions/0170).
	turns := newTurns(e.store, log)
	job(true, jobs.SeverityEvery, def.SeverityEvery, func(d time.Duration) {
		// A fresh limiter grades every row again at once: the policies
		// may differ from the last process's (Limiter.Reevaluate).
		e.reevaluate(ctx)
		everyTick(ctx, d, func() { e.reevaluate(ctx) })
	})
	job(true, jobs.SeverityEvery, def.SeverityEvery, func(d time.Duration) {
		// A policy put in or out of shadow mode by another process.
		everyTick(ctx, d, func() {
			if err := e.loadShadows(ctx); err != nil && ctx.Err() == nil {
				log.Warn("policies in shadow mode", slog.Any("error", err))
			}
		})
	})
	job(e.sender != nil, jobs.SifenPollEvery, def.SifenPollEvery, func(d time.Duration) { e.sender.RunPoll(ctx, d, e.reportPoll(ctx)) })
	job(e.sender != nil, jobs.SifenResolveEvery, def.SifenResolveEvery, func(d time.Duration) {
		turns.every(ctx, "sifen-resolve", d, func() { e.resolveSifen(ctx) })
	})
	job(e.dict != nil, jobs.DictReconcileEvery, def.DictReconcileEvery, func(d time.Duration) {
		log.Info("DICT reconciliation on", slog.Duration("every", d))
		turns.every(ctx, "dict-reconcile:"+e.catalog.Env()+":"+e.dictConfig.Participant, d, func() { e.reconcileDict(ctx) })
	})
	job(true, jobs.PruneEvery, def.PruneEvery, func(d time.Duration) {
		turns.every(ctx, "prune", d, func() { e.prune(ctx, jobs.Retention) })
	})
	job(true, jobs.DatabaseWatchEvery, def.DatabaseWatchEvery, func(d time.Duration) { e.watchDatabase(ctx, d) })
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

// resolveSifen settles the SIFEN documents left in "sending"
// (sifen.Sender.Resolve); what it cannot settle now is logged.
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

// reconcileDict reconciles the local DICT buckets with the DICT's GET
// /policies/ once (dict.Client.Reconcile) and logs the result.
func (e *Engine) reconcileDict(ctx context.Context) {
	res, err := e.dict.Reconcile(ctx)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			e.logger.Warn("DICT reconciliation failed", slog.Any("error", err))
		}
	case !res.Decision.Allowed:
		e.logger.Info("DICT reconciliation deferred: POLICIES_LIST bucket empty", slog.Duration("retry_after", res.Decision.RetryAfter))
	default:
		e.logger.Info("DICT reconciled", slog.String("category", res.Category),
			slog.Int("lowered", len(res.Lowered)), slog.Int("mismatched", len(res.Mismatched)))
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

// watchDatabase logs at error level, every period, while the store's
// SQLite file is not the one it opened (deleted or replaced under the
// process: its writes go to a file nobody will find). CheckHealth fails
// meanwhile.
func (e *Engine) watchDatabase(ctx context.Context, every time.Duration) {
	everyTick(ctx, every, func() {
		if err := e.store.CheckIdentity(); err != nil {
			e.logger.Error("THE DATABASE FILE WAS DELETED OR REPLACED: writes are going to an unlinked file; stop the process, restore the file, restart",
				slog.String("identity", e.store.Identity().String()), slog.Any("error", err))
		}
	})
}

// everyTick runs fn every period, the first one from now, until ctx ends.
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
