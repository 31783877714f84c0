package balde

import (
	"context"
	"fmt"
	"time"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
)

// PruneResult counts what Engine.Prune removed: ledger rows, idle
// buckets, DICT lookup records and audit trail entries older than Before.
type PruneResult struct {
	throttle.PruneResult
	Before                 time.Time
	DictLookups, AuditRows int64
}

// Prune applies the retention (0: throttle.DefaultRetention) to the ledger,
// the DICT lookups and the audit trail, and removes idle buckets (unless
// opts.SkipBuckets), in bounded batches (opts.Batch rows; 0: 1000) so that
// decisions go on meanwhile. Run calls it once per Jobs.PruneEvery across
// the processes on the database (docs/decisions/0171).
func (e *Engine) Prune(ctx context.Context, opts throttle.PruneOptions) (PruneResult, error) {
	res := e.pruneResult(opts)
	var err error
	res.PruneResult, err = e.limiter.Prune(ctx, opts)
	if err != nil {
		return res, err
	}
	batch := opts.Batch
	if batch <= 0 {
		batch = 1000
	}
	drain := func(prune func(context.Context, time.Time, int) (int64, error), removed *int64) error {
		for {
			n, err := prune(ctx, res.Before, batch)
			*removed += n
			if err != nil || n < int64(batch) {
				return err
			}
		}
	}
	if err := drain(e.records.PruneLookups, &res.DictLookups); err != nil {
		return res, err
	}
	// Audit entries by their own time (decision 0076), under the same
	// retention: they name the operators.
	return res, drain(e.audit.Prune, &res.AuditRows)
}

// CountPrune counts, removing nothing, what Prune with the same options
// would remove now ("balde prune --dry-run"): ledger rows (an aggregated
// row is one), DICT lookups and audit entries older than the retention,
// and (unless opts.SkipBuckets) the buckets idle now — full, nothing held,
// no cooldown or block — with no ledger row within the retention.
func (e *Engine) CountPrune(ctx context.Context, opts throttle.PruneOptions) (PruneResult, error) {
	res := e.pruneResult(opts)
	db := e.store.ReadDB()
	for _, c := range []struct {
		what, query string
		n           *int64
	}{
		// Ledger rows as the prune deletes them: oldest id first, up to the
		// first row younger than the retention.
		{"ledger rows", `SELECT count(*) FROM balde_token_ledger WHERE id < COALESCE(
			(SELECT min(id) FROM balde_token_ledger WHERE at >= ?),
			(SELECT max(id) + 1 FROM balde_token_ledger),
			0)`, &res.LedgerRows},
		{"DICT lookups", `SELECT count(*) FROM balde_dict_lookups WHERE looked_up_at < ?`, &res.DictLookups},
		{"audit entries", `SELECT count(*) FROM balde_audit WHERE at < ?`, &res.AuditRows},
	} {
		if err := db.QueryRowContext(ctx, db.Rebind(c.query), res.Before.UnixNano()).Scan(c.n); err != nil {
			return res, fmt.Errorf("balde: count %s to prune: %w", c.what, err)
		}
	}
	if opts.SkipBuckets {
		return res, nil
	}
	states, _, err := e.reader.ListAll(ctx, inspect.Filter{})
	if err != nil {
		return res, err
	}
	for _, st := range states {
		if st.Orphan || st.Tokens < st.Policy.Capacity || len(st.Spent) > 0 || st.CooldownLeft > 0 || st.BlockLeft > 0 {
			continue
		}
		kept, err := e.reader.Ledger(ctx, inspect.LedgerQuery{Key: &st.Key, Since: res.Before, Limit: 1})
		if err != nil {
			return res, err
		}
		if len(kept) == 0 {
			res.Buckets++
		}
	}
	return res, nil
}

// pruneResult is a result of Prune with opts: Before set by the retention
// (0: throttle.DefaultRetention).
func (e *Engine) pruneResult(opts throttle.PruneOptions) PruneResult {
	if opts.Retention <= 0 {
		opts.Retention = throttle.DefaultRetention
	}
	return PruneResult{Before: e.limiter.Now().Add(-opts.Retention)}
}
