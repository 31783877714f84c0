package main

import (
	"context"
	"errors"

	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/throttle"
)

// runPrune is "balde prune": the ledger's retention, the removal of bucket
// rows equal to a full bucket (a key with no row is full), and the
// retention of the DICT's lookup records. Each deletion is a bounded batch
// in its own transaction, so a prune never holds the write lock for long
// and may run while serve and the batch commands work. --dry-run counts
// what would go and deletes nothing.
func runPrune(ctx context.Context, m *Main, args []string) (err error) {
	cfg, fs, parse := m.newCommand("prune", "prune [--retention D] [--dry-run] [--force] [--batch N] [--skip-buckets] [--json] [--db DSN]",
		"balde prune --dry-run --retention 720h --db sqlite://balde.db", storeFlags, dictFlags, policyFlags)
	retention := cfg.LedgerRetention
	fs.Var(settings.FlagOf(&retention, settings.ParseDuration, nil), "retention", "keep ledger rows and DICT lookups younger than this (env BALDE_LEDGER_RETENTION); under 24h needs --force")
	batch := fs.Int("batch", 1000, "most rows deleted per transaction")
	skipBuckets := fs.Bool("skip-buckets", false, "keep idle bucket rows (prune the ledger and lookups only)")
	dryRun := fs.Bool("dry-run", false, "count what would be removed; remove nothing")
	force := fs.Bool("force", false, "accept a retention under 24h (the ledger is the audit trail)")
	jsonOut := fs.Bool("json", false, "write one JSON object")
	if err := parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return UsageError("prune: unexpected arguments %q", fs.Args())
	}
	if retention <= 0 {
		return UsageError("prune: --retention must be positive (e.g. 720h)")
	}
	if retention < settings.MinRetention && !*force && !*dryRun {
		return UsageError("prune: --retention %s would erase the audit trail of the last day; use at least %s, or add --force (try --dry-run first)", retention, settings.MinRetention)
	}
	if *batch <= 0 {
		return UsageError("prune: --batch %d: want a positive number of rows", *batch)
	}

	eng, err := openAdminEngine(ctx, *cfg, m.Clock)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, eng.Close(ctx)) }()
	opts := throttle.PruneOptions{Retention: retention, Batch: *batch, SkipBuckets: *skipBuckets}
	prune := eng.Prune
	if *dryRun {
		prune = eng.CountPrune
	}
	res, err := prune(ctx, opts)
	if err != nil {
		return err
	}
	rec := report.NewPruneRecord(res, *skipBuckets, *dryRun)
	if *jsonOut {
		report.WriteJSONLine(m.Stdout, rec)
	} else {
		report.WritePrune(m.Stdout, m.printer(), rec, retention)
	}
	return nil
}
