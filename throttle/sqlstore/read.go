package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
)

// buckets is Buckets without its retries; Buckets implements throttle.Store.
func (s *Store) buckets(ctx context.Context, keys []throttle.Key) ([]throttle.Bucket, error) {
	q := s.read.Rebind(`
		SELECT ` + bucketColumns + `
		FROM balde_buckets
		WHERE policy_id = ? AND env = ? AND identifier = ?`)
	var out []throttle.Bucket
	for _, k := range keys {
		id, ok, err := s.lookupPolicy(ctx, k.Policy)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		r, err := scanBucketRow(s.read.QueryRowContext(ctx, q, id, k.Env, k.Identifier))
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, formatError("read bucket", err)
		}
		b, err := r.bucket(k)
		if err != nil {
			return nil, formatError("read bucket", err)
		}
		out = append(out, b)
	}
	return out, nil
}

// where builds the WHERE clause of a bucket filter. ok is false when the
// filter names a policy that was never stored (nothing can match).
func (s *Store) where(ctx context.Context, f inspect.Filter, withCursor bool) (clause string, args []any, ok bool, err error) {
	var conds []string
	if f.Policy != "" {
		id, known, err := s.lookupPolicy(ctx, f.Policy)
		if err != nil || !known {
			return "", nil, false, err
		}
		conds, args = append(conds, "policy_id = ?"), append(args, id)
	}
	if f.Env != "" {
		conds, args = append(conds, "env = ?"), append(args, f.Env)
	}
	for _, name := range f.ExcludePolicies {
		id, known, err := s.lookupPolicy(ctx, name)
		if err != nil {
			return "", nil, false, err
		}
		if known {
			conds, args = append(conds, "policy_id <> ?"), append(args, id)
		}
	}
	if f.MinSeverity > throttle.SeverityUnknown {
		conds, args = append(conds, "severity >= ?"), append(args, int64(f.MinSeverity))
	}
	if f.IdentifierPrefix != "" {
		conds, args = append(conds, "identifier >= ?"), append(args, f.IdentifierPrefix)
		if upper, ok := prefixEnd(f.IdentifierPrefix); ok {
			conds, args = append(conds, "identifier < ?"), append(args, upper)
		}
	}
	if withCursor && f.After != (throttle.Key{}) {
		id, known, err := s.lookupPolicy(ctx, f.After.Policy)
		if err != nil {
			return "", nil, false, err
		}
		if !known {
			return "", nil, false, fmt.Errorf("%w: cursor names unknown policy %q", throttle.ErrInvalidKey, f.After.Policy)
		}
		conds = append(conds, "(policy_id, env, identifier) > (?, ?, ?)")
		args = append(args, id, f.After.Env, f.After.Identifier)
	}
	if len(conds) == 0 {
		return "", nil, true, nil
	}
	return "WHERE " + strings.Join(conds, " AND "), args, true, nil
}

// prefixEnd returns the smallest string greater than every string with the
// prefix p (bytewise), or false when there is none (p is all 0xFF bytes).
func prefixEnd(p string) (string, bool) {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xFF {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}

// list is List without its retries; List implements inspect.Store, in (policy id, env, identifier) order.
func (s *Store) list(ctx context.Context, f inspect.Filter) ([]throttle.Bucket, error) {
	where, args, ok, err := s.where(ctx, f, true)
	if err != nil || !ok {
		return nil, err
	}
	limit := cmp.Or(max(f.Limit, 0), inspect.DefaultPageSize)
	rows, err := s.read.QueryContext(ctx, s.read.Rebind(`
		SELECT `+bucketColumns+`
		FROM balde_buckets
		`+where+`
		ORDER BY policy_id, env, identifier
		LIMIT ?`), append(args, limit)...)
	if err != nil {
		return nil, formatError("list buckets", err)
	}
	defer rows.Close()
	var out []throttle.Bucket
	for rows.Next() {
		r, err := scanBucketRow(rows)
		if err != nil {
			return nil, formatError("list buckets", err)
		}
		name, err := s.nameOf(ctx, r.key.policyID)
		if err != nil {
			return nil, err
		}
		b, err := r.bucket(throttle.Key{Policy: name, Env: r.key.env, Identifier: r.key.identifier})
		if err != nil {
			return nil, formatError("list buckets", err)
		}
		out = append(out, b)
	}
	return out, formatError("list buckets", rows.Err())
}

// countBySeverity is CountBySeverity without its retries; CountBySeverity implements inspect.Store.
func (s *Store) countBySeverity(ctx context.Context, f inspect.Filter) (map[throttle.Severity]int64, error) {
	where, args, ok, err := s.where(ctx, f, false)
	out := make(map[throttle.Severity]int64)
	if err != nil || !ok {
		return out, err
	}
	rows, err := s.read.QueryContext(ctx, s.read.Rebind(`
		SELECT severity, count(*)
		FROM balde_buckets
		`+where+`
		GROUP BY severity`), args...)
	if err != nil {
		return nil, formatError("count buckets", err)
	}
	defer rows.Close()
	for rows.Next() {
		var sev, n int64
		if err := rows.Scan(&sev, &n); err != nil {
			return nil, formatError("count buckets", err)
		}
		out[throttle.Severity(sev)] = n
	}
	return out, formatError("count buckets", rows.Err())
}

// ledgerWhere builds the WHERE clause of a ledger query.
func (s *Store) ledgerWhere(ctx context.Context, q inspect.LedgerQuery, withCursor bool) (string, []any, bool, error) {
	var conds []string
	var args []any
	if policy := q.Policy; policy != "" {
		id, known, err := s.lookupPolicy(ctx, policy)
		if err != nil || !known {
			return "", nil, false, err
		}
		conds, args = append(conds, "policy_id = ?"), append(args, id)
	}
	if len(q.Reasons) > 0 {
		var in string
		in, args = reasonsIn(q.Reasons, args)
		conds = append(conds, in)
	}
	if !q.Since.IsZero() {
		conds, args = append(conds, "at >= ?"), append(args, nanos(q.Since))
	}
	if withCursor && q.BeforeID > 0 {
		conds, args = append(conds, "id < ?"), append(args, q.BeforeID)
	}
	if len(conds) == 0 {
		return "", nil, true, nil
	}
	return "WHERE " + strings.Join(conds, " AND "), args, true, nil
}

// ledger is Ledger without its retries; Ledger implements inspect.Store.
func (s *Store) ledger(ctx context.Context, q inspect.LedgerQuery) ([]throttle.LedgerEntry, error) {
	limit := cmp.Or(max(q.Limit, 0), inspect.DefaultPageSize)
	if q.Key != nil {
		return s.bucketLedger(ctx, q, limit)
	}
	where, args, ok, err := s.ledgerWhere(ctx, q, true)
	if err != nil || !ok {
		return nil, err
	}
	rows, err := s.read.QueryContext(ctx, s.read.Rebind(`
		SELECT `+ledgerColumns+`
		FROM balde_token_ledger
		`+where+`
		ORDER BY id DESC
		LIMIT ?`), append(args, limit)...)
	if err != nil {
		return nil, formatError("read ledger", err)
	}
	return s.scanLedger(ctx, rows)
}

func (s *Store) scanLedger(ctx context.Context, rows *sql.Rows) ([]throttle.LedgerEntry, error) {
	defer rows.Close()
	var out []throttle.LedgerEntry
	for rows.Next() {
		r, err := scanLedgerRow(rows)
		if err != nil {
			return nil, formatError("read ledger", err)
		}
		name, err := s.nameOf(ctx, r.key.policyID)
		if err != nil {
			return nil, err
		}
		out = append(out, r.entry(throttle.Key{Policy: name, Env: r.key.env, Identifier: r.key.identifier}))
	}
	return out, formatError("read ledger", rows.Err())
}

// maxWalk bounds how many rows of one bucket's chain a read walks.
const maxWalk = 1_000_000

// walkChain returns the SQL of a walk along one bucket's ledger rows, newest
// first, from its latest row (or the row before BeforeID), stopping at
// Since, at another bucket's row or after depth rows, and the filter on
// reasons for the outer query.
func (s *Store) walkChain(ctx context.Context, q inspect.LedgerQuery, depth int) (cte, reasons string, args, reasonArgs []any, ok bool, err error) {
	id, known, err := s.lookupPolicy(ctx, q.Key.Policy)
	if err != nil || !known {
		return "", "", nil, nil, false, err
	}
	k := []any{id, q.Key.Env, q.Key.Identifier}
	start := `(SELECT last_entry FROM balde_buckets WHERE policy_id = ? AND env = ? AND identifier = ?)`
	startArgs := k
	if q.BeforeID > 0 {
		start, startArgs = `(SELECT prev FROM balde_token_ledger WHERE id = ?)`, []any{q.BeforeID}
	}
	since := ""
	var sinceArgs []any
	if !q.Since.IsZero() {
		since, sinceArgs = " AND at >= ?", []any{nanos(q.Since)}
	}
	cte = `WITH RECURSIVE chain AS (
			SELECT ` + ledgerColumns + `, 1 AS depth
			FROM balde_token_ledger
			WHERE id = ` + start + ` AND policy_id = ? AND env = ? AND identifier = ?` + since + `
			UNION ALL
			SELECT l.id, l.policy_id, l.env, l.identifier, l.at, l.reason, l.delta, l.balance, l.n, l.prev, l.ref, c.depth + 1
			FROM balde_token_ledger AS l
			JOIN chain AS c ON l.id = c.prev
			WHERE l.policy_id = ? AND l.env = ? AND l.identifier = ? AND c.depth < ?` + strings.ReplaceAll(since, "at", "l.at") + `
		)`
	args = append(append(append(append(append(args, startArgs...), k...), sinceArgs...), k...), depth)
	args = append(args, sinceArgs...)
	if len(q.Reasons) > 0 {
		reasons, reasonArgs = reasonsIn(q.Reasons, nil)
		reasons = "WHERE " + reasons
	}
	return cte, reasons, args, reasonArgs, true, nil
}

// reasonsIn is the condition "reason IN (?, ...)" of reasons, a take's
// including the aggregated take rows, and args with its arguments.
func reasonsIn(reasons []throttle.LedgerReason, args []any) (string, []any) {
	var in []string
	for _, r := range reasons {
		in, args = append(in, "?"), append(args, int64(r))
		if r == throttle.LedgerTake {
			in, args = append(in, "?"), append(args, int64(reasonMinuteOfTakes))
		}
	}
	return "reason IN (" + strings.Join(in, ", ") + ")", args
}

// bucketLedger reads one bucket's latest rows by walking its chain.
func (s *Store) bucketLedger(ctx context.Context, q inspect.LedgerQuery, limit int) ([]throttle.LedgerEntry, error) {
	depth := limit // without a filter on reasons, the walk is exactly the page
	if len(q.Reasons) > 0 {
		depth = maxWalk
	}
	cte, reasons, args, reasonArgs, ok, err := s.walkChain(ctx, q, depth)
	if err != nil || !ok {
		return nil, err
	}
	rows, err := s.read.QueryContext(ctx, s.read.Rebind(cte+`
		SELECT `+ledgerColumns+`
		FROM chain
		`+reasons+`
		LIMIT ?`), append(append(args, reasonArgs...), limit)...)
	if err != nil {
		return nil, formatError("read ledger", err)
	}
	return s.scanLedger(ctx, rows)
}

// countLedger is CountLedger without its retries; CountLedger implements inspect.Store.
func (s *Store) countLedger(ctx context.Context, q inspect.LedgerQuery) (int64, error) {
	if q.Key != nil {
		q.BeforeID = 0
		cte, reasons, args, reasonArgs, ok, err := s.walkChain(ctx, q, maxWalk)
		if err != nil || !ok {
			return 0, err
		}
		var n int64
		err = s.read.QueryRowContext(ctx, s.read.Rebind(cte+`
			SELECT COALESCE(SUM(n), 0)
			FROM chain
			`+reasons), append(args, reasonArgs...)...).Scan(&n)
		return n, formatError("count ledger", err)
	}
	where, args, ok, err := s.ledgerWhere(ctx, q, false)
	if err != nil || !ok {
		return 0, err
	}
	var n int64
	err = s.read.QueryRowContext(ctx, s.read.Rebind(`
		SELECT COALESCE(SUM(n), 0)
		FROM balde_token_ledger
		`+where), args...).Scan(&n)
	return n, formatError("count ledger", err)
}

// pruneLedger is PruneLedger without its retries: it deletes the longest
// run of oldest ids (insertion order) whose rows are all older than before,
// up to limit, stopping at the first younger row so its cost is bounded by
// limit; then, within the same limit, the refusal rows expired by their own
// time that lie after a younger row (pruneLateRefusals).
func (s *Store) pruneLedger(ctx context.Context, before time.Time, limit int) (int64, error) {
	n, err := s.pruneLedgerRun(ctx, before, limit)
	if err != nil || n >= int64(limit) {
		return n, err
	}
	late, err := s.pruneLateRefusals(ctx, before, limit-int(n))
	return n + late, err
}

// pruneLateRefusals deletes up to limit refusal rows expired by their own
// time (a group once At+RefusalGroupSpan is before before), found through
// the balde_token_ledger_events index. The bucket's last_entry, then the
// next row of the chain, are pointed at the row before each first.
func (s *Store) pruneLateRefusals(ctx context.Context, before time.Time, limit int) (int64, error) {
	tx, err := s.write.BeginTxx(ctx, nil)
	if err != nil {
		return 0, formatError("prune ledger", err)
	}
	defer tx.Rollback()
	type lateRow struct {
		id, policyID    int64
		env, identifier string
	}
	cutoff, groupCutoff := nanos(before), nanos(before.Add(throttle.RefusalGroupSpan))
	// "reason NOT IN (1, 10)" repeats the partial index's predicate so that
	// both engines use it.
	rows, err := tx.QueryContext(ctx, s.write.Rebind(`
		SELECT id, policy_id, env, identifier
		FROM balde_token_ledger
		WHERE reason IN (`+refusalReasonsSQL()+`) AND reason NOT IN (1, 10)
			AND at < ? AND (at < ? OR n > 1)
		ORDER BY id
		LIMIT ?`), groupCutoff, cutoff, limit)
	if err != nil {
		return 0, formatError("prune ledger", err)
	}
	var late []lateRow
	for rows.Next() {
		var r lateRow
		if err := rows.Scan(&r.id, &r.policyID, &r.env, &r.identifier); err != nil {
			rows.Close()
			return 0, formatError("prune ledger", err)
		}
		late = append(late, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, formatError("prune ledger", err)
	}
	if len(late) == 0 {
		return 0, nil
	}
	relinkBucket := s.write.Rebind(`
		UPDATE balde_buckets
		SET last_entry = CASE WHEN last_entry = ? THEN ? ELSE last_entry END
		WHERE policy_id = ? AND env = ? AND identifier = ?`)
	relinkNext := s.write.Rebind(`UPDATE balde_token_ledger SET prev = ? WHERE id > ? AND prev = ?`)
	remove := s.write.Rebind(`DELETE FROM balde_token_ledger WHERE id = ?`)
	readPrev := s.write.Rebind(`SELECT prev FROM balde_token_ledger WHERE id = ?`)
	for _, r := range late {
		// Read now: the row before may itself have been deleted above.
		var prev sql.NullInt64
		if err := tx.QueryRowContext(ctx, readPrev, r.id).Scan(&prev); err != nil {
			return 0, formatError("prune ledger", err)
		}
		if _, err := tx.ExecContext(ctx, relinkBucket, r.id, prev, r.policyID, r.env, r.identifier); err != nil {
			return 0, formatError("prune ledger", err)
		}
		if _, err := tx.ExecContext(ctx, relinkNext, prev, r.id, r.id); err != nil {
			return 0, formatError("prune ledger", err)
		}
		if _, err := tx.ExecContext(ctx, remove, r.id); err != nil {
			return 0, formatError("prune ledger", err)
		}
	}
	return int64(len(late)), formatError("prune ledger", tx.Commit())
}

// pruneLedgerRun deletes the run of oldest ids (see pruneLedger).
func (s *Store) pruneLedgerRun(ctx context.Context, before time.Time, limit int) (int64, error) {
	tx, err := s.write.BeginTxx(ctx, nil)
	if err != nil {
		return 0, formatError("prune ledger", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, s.write.Rebind(`
		SELECT id, at
		FROM balde_token_ledger
		ORDER BY id
		LIMIT ?`), limit)
	if err != nil {
		return 0, formatError("prune ledger", err)
	}
	var n, last int64
	cutoff := nanos(before)
	for rows.Next() {
		var id, at int64
		if err := rows.Scan(&id, &at); err != nil {
			rows.Close()
			return 0, formatError("prune ledger", err)
		}
		if at >= cutoff {
			break
		}
		n, last = n+1, id
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, formatError("prune ledger", err)
	}
	if n == 0 {
		return 0, nil
	}
	if _, err := tx.ExecContext(ctx, s.write.Rebind(`DELETE FROM balde_token_ledger WHERE id <= ?`), last); err != nil {
		return 0, formatError("prune ledger", err)
	}
	return n, formatError("prune ledger", tx.Commit())
}
