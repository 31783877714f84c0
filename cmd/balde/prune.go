package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/balde-throttle/balde/web"
)

// runPrune is "balde prune": the ledger's retention, the removal of bucket
// rows equal to a full bucket (a key with no row is full), and the
// retention of the DICT's lookup records. Each deletion is a bounded batch
// in its own transaction, so a prune never holds the write lock for long
// and may run while serve and the batch commands work.
func runPrune(ctx context.Context, m *Main, args []string) (err error) {
	cfg := DefaultConfig()
	if err := cfg.ParseEnv(m.Getenv); err != nil {
		return UsageError("%v", err)
	}
	fs := m.newFlagSet("prune", "prune [--retention D] [--batch N] [--skip-buckets] [--json] [--db DSN]",
		"balde prune --retention 720h --db postgres://balde@127.0.0.1:5432/balde")
	cfg.addStoreFlags(fs)
	cfg.addDictFlags(fs)
	cfg.addPolicyFlags(fs)
	retention := cfg.LedgerRetention
	fs.Var(durationFlag(&retention), "retention", "keep ledger rows and DICT lookups younger than this (env BALDE_LEDGER_RETENTION)")
	batch := fs.Int("batch", 1000, "most rows deleted per transaction")
	skipBuckets := fs.Bool("skip-buckets", false, "keep idle bucket rows (prune the ledger and lookups only)")
	jsonOut := fs.Bool("json", false, "write one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return UsageError("prune: unexpected arguments %q", fs.Args())
	}
	if retention <= 0 {
		return UsageError("prune: --retention must be positive (e.g. 720h)")
	}
	if *batch <= 0 {
		return UsageError("prune: --batch %d: want a positive number of rows", *batch)
	}

	eng, err := openAdminEngine(ctx, cfg, m.Clock)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, eng.close(ctx)) }()
	res, err := eng.prune(ctx, retention, *batch, *skipBuckets)
	if err != nil {
		return err
	}
	before, lookups := res.Before, res.DictLookups

	if *jsonOut {
		writeJSONLine(m.Stdout, struct {
			Before      time.Time `json:"before"`
			LedgerRows  int64     `json:"ledger_rows"`
			Buckets     int64     `json:"buckets"`
			DictLookups int64     `json:"dict_lookups"`
			SkipBuckets bool      `json:"skip_buckets"`
		}{before.UTC(), res.LedgerRows, res.Buckets, lookups, *skipBuckets})
		return nil
	}
	fmt.Fprintf(m.Stdout, "removed %d ledger rows and %d DICT lookups older than %s (before %s)\n",
		res.LedgerRows, lookups, retention, before.UTC().Format(web.TimeLayout))
	if *skipBuckets {
		fmt.Fprintln(m.Stdout, "idle buckets kept (--skip-buckets)")
	} else {
		fmt.Fprintf(m.Stdout, "removed %d idle buckets (full, no cooldown or block: the same as no row)\n", res.Buckets)
	}
	return nil
}
