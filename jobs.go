package balde

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/balde-throttle/balde/internal/jobs"
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

// Run does the engine's background work (balde serve's) until ctx ends:
// each job of Config.Jobs at its period, logging to Config.Logger. At
// start it learns the DICT category (Config.Dict with LearnCategory; a
// DICT that cannot be asked is logged and the strictest category applies)
// and settles the documents a crashed send left in "sending"
// (Config.Sifen), then closes Started. A failed job is logged and tried
// again at its next period. Run returns an error only when the start work
// cannot be done (the database cannot answer), and nil once ctx ends and
// every job has stopped. Call it once; let it return before Close.
func (e *Engine) Run(ctx context.Context) error {
	if !e.running.CompareAndSwap(false, true) {
		return errors.New("balde: Engine.Run called twice")
	}
	periods, def, log := e.jobs, DefaultJobs(), e.logger
	if e.dictConfig.Simulator {
		def.DictReconcileEvery = Off // its buckets see only this process's traffic
	}
	if e.dict != nil && e.dictConfig.LearnCategory {
		if err := jobs.LearnCategory(ctx, e.dict, log); err != nil {
			return err
		}
	}
	if e.sender != nil {
		// Before anything sends: documents a crashed send left in
		// "sending" are settled by asking SIFEN, or stay (and are logged).
		jobs.ResolveSifen(ctx, e.sender, log)
	}
	close(e.started)

	var wg sync.WaitGroup
	// job runs fn(period) on a goroutine of its own when on and not Off.
	job := func(on bool, every, def time.Duration, fn func(time.Duration)) {
		if every = cmp.Or(every, def); on && every > 0 {
			wg.Go(func() { fn(every) })
		}
	}
	turns := jobs.NewTurns(e.store, log) // once per period across processes (Jobs)
	job(true, periods.SeverityEvery, def.SeverityEvery, func(d time.Duration) {
		// A fresh limiter grades every row again at once: the policies
		// may differ from the last process's (Limiter.Reevaluate).
		jobs.Reevaluate(ctx, e.limiter, log)
		jobs.Every(ctx, d, func() { jobs.Reevaluate(ctx, e.limiter, log) })
	})
	job(true, periods.SeverityEvery, def.SeverityEvery, func(d time.Duration) {
		// A policy put in or out of shadow mode by another process.
		jobs.Every(ctx, d, func() {
			if err := e.shadows.Load(ctx, e.store); err != nil && ctx.Err() == nil {
				log.Warn("policies in shadow mode", slog.Any("error", err))
			}
		})
	})
	job(e.sender != nil, periods.SifenPollEvery, def.SifenPollEvery, func(d time.Duration) { e.sender.RunPoll(ctx, d, jobs.ReportPoll(ctx, log)) })
	job(e.sender != nil, periods.SifenResolveEvery, def.SifenResolveEvery, func(d time.Duration) {
		turns.Every(ctx, "sifen-resolve", d, func() { jobs.ResolveSifen(ctx, e.sender, log) })
	})
	job(e.dict != nil, periods.DictReconcileEvery, def.DictReconcileEvery, func(d time.Duration) {
		log.Info("DICT reconciliation on", slog.Duration("every", d))
		turns.Every(ctx, "dict-reconcile:"+e.catalog.Env()+":"+e.dictConfig.Participant, d, func() { jobs.ReconcileDict(ctx, e.dict, log) })
	})
	job(true, periods.PruneEvery, def.PruneEvery, func(d time.Duration) {
		turns.Every(ctx, "prune", d, func() {
			res, err := e.Prune(ctx, throttle.PruneOptions{Retention: periods.Retention})
			if err != nil && ctx.Err() == nil {
				log.Warn("prune", slog.Any("error", err))
			}
			log.Info("pruned", slog.Int64("ledger_rows", res.LedgerRows), slog.Int64("buckets", res.Buckets), slog.Int64("dict_lookups", res.DictLookups), slog.Int64("audit_rows", res.AuditRows))
		})
	})
	// A SQLite file deleted or replaced under the process (CheckHealth
	// fails meanwhile).
	job(true, periods.DatabaseWatchEvery, def.DatabaseWatchEvery, func(d time.Duration) { jobs.WatchDatabase(ctx, e.store, d, log) })
	<-ctx.Done()
	wg.Wait()
	return nil
}

// Started is closed once Run has done its start work (the SIFEN interval
// shared, documents left in "sending" settled).
func (e *Engine) Started() <-chan struct{} { return e.started }
