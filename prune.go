package balde

import (
	"context"
	"fmt"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/inspect"
)

// CountPrune counts, removing nothing, what Prune with the same options
// would remove now: ledger rows older than the retention (an aggregated
// row is one row, whatever takes it stands for), DICT lookups and audit
// entries older than it, and (unless opts.SkipBuckets) the stored buckets that are idle now —
// full, nothing held, no cooldown or block — and whose ledger has no row
// within the retention (Prune keeps those, so that their ledger stays in
// view). opts.Batch is ignored. It is "balde prune --dry-run".
func (e *Engine) CountPrune(ctx context.Context, opts throttle.PruneOptions) (PruneResult, error) {
	retention := opts.Retention
	if retention <= 0 {
		retention = throttle.DefaultRetention
	}
	res := PruneResult{Before: e.limiter.Now().Add(-retention)}
	db := e.store.ReadDB()
	// Rows, as the prune deletes them: oldest id first, up to the first
	// row younger than the retention.
	if err := db.QueryRowContext(ctx, db.Rebind(`
		SELECT count(*)
		FROM balde_token_ledger
		WHERE id < COALESCE(
			(SELECT min(id) FROM balde_token_ledger WHERE at >= ?),
			(SELECT max(id) + 1 FROM balde_token_ledger),
			0)`), res.Before.UnixNano()).Scan(&res.LedgerRows); err != nil {
		return res, fmt.Errorf("balde: count ledger rows to prune: %w", err)
	}
	if err := db.QueryRowContext(ctx, db.Rebind(`
		SELECT count(*)
		FROM balde_dict_lookups
		WHERE looked_up_at < ?`), res.Before.UnixNano()).Scan(&res.DictLookups); err != nil {
		return res, fmt.Errorf("balde: count DICT lookups to prune: %w", err)
	}
	if err := db.QueryRowContext(ctx, db.Rebind(`
		SELECT count(*)
		FROM balde_audit
		WHERE at < ?`), res.Before.UnixNano()).Scan(&res.AuditRows); err != nil {
		return res, fmt.Errorf("balde: count audit entries to prune: %w", err)
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
