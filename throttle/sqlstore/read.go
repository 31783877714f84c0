package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/internal/sqlkit"
	"github.com/balde-throttle/balde/internal/sqltime"
	"github.com/balde-throttle/balde/throttle"
)

// Buckets implements throttle.Store.
func (s *Store) Buckets(ctx context.Context, keys []throttle.Key) ([]throttle.Bucket, error) {
	return retried(ctx, s, "buckets", func() ([]throttle.Bucket, error) {
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
	})
}

// reasons adds to c the condition "reason IN (?, ...)" of rs, a take's
// including the aggregated take rows.
func reasons(c *sqlkit.Conds, rs []throttle.LedgerReason) {
	var in []string
	var args []any
	for _, r := range rs {
		in, args = append(in, "?"), append(args, int64(r))
		if r == throttle.LedgerTake {
			in, args = append(in, "?"), append(args, int64(reasonMinuteOfTakes))
		}
	}
	c.And(true, "reason IN ("+strings.Join(in, ", ")+")", args...)
}

// where builds the WHERE clause of a bucket filter. ok is false when the
// filter names a policy that was never stored (nothing can match).
func (s *Store) where(ctx context.Context, f inspect.Filter, withCursor bool) (c sqlkit.Conds, ok bool, err error) {
	if f.Policy != "" {
		id, known, err := s.lookupPolicy(ctx, f.Policy)
		if err != nil || !known {
			return c, false, err
		}
		c.And(true, "policy_id = ?", id)
	}
	c.And(f.Env != "", "env = ?", f.Env)
	for _, name := range f.ExcludePolicies {
		id, known, err := s.lookupPolicy(ctx, name)
		if err != nil {
			return c, false, err
		}
		c.And(known, "policy_id <> ?", id)
	}
	c.And(f.MinSeverity > throttle.SeverityUnknown, "severity >= ?", int64(f.MinSeverity))
	if f.IdentifierPrefix != "" {
		c.And(true, "identifier >= ?", f.IdentifierPrefix)
		upper, ok := prefixEnd(f.IdentifierPrefix)
		c.And(ok, "identifier < ?", upper)
	}
	if withCursor && f.After != (throttle.Key{}) {
		id, known, err := s.lookupPolicy(ctx, f.After.Policy)
		if err != nil {
			return c, false, err
		}
		if !known {
			return c, false, fmt.Errorf("%w: cursor names unknown policy %q", throttle.ErrInvalidKey, f.After.Policy)
		}
		c.And(true, "(policy_id, env, identifier) > (?, ?, ?)", id, f.After.Env, f.After.Identifier)
	}
	return c, true, nil
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

// List implements inspect.Store, in (policy id, env, identifier) order.
func (s *Store) List(ctx context.Context, f inspect.Filter) ([]throttle.Bucket, error) {
	return retried(ctx, s, "list", func() ([]throttle.Bucket, error) {
		c, ok, err := s.where(ctx, f, true)
		if err != nil || !ok {
			return nil, err
		}
		limit := cmp.Or(max(f.Limit, 0), inspect.DefaultPageSize)
		rows, err := queryAll(ctx, s.read, s.read.Rebind(`
			SELECT `+bucketColumns+`
			FROM balde_buckets
			`+c.Where()+`
			ORDER BY policy_id, env, identifier
			LIMIT ?`), append(c.Args, limit), scanBucketRow)
		if err != nil {
			return nil, formatError("list buckets", err)
		}
		out := make([]throttle.Bucket, 0, len(rows))
		for _, r := range rows {
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
		return out, nil
	})
}

// CountBySeverity implements inspect.Store.
func (s *Store) CountBySeverity(ctx context.Context, f inspect.Filter) (map[throttle.Severity]int64, error) {
	return retried(ctx, s, "count by severity", func() (map[throttle.Severity]int64, error) {
		c, ok, err := s.where(ctx, f, false)
		out := make(map[throttle.Severity]int64)
		if err != nil || !ok {
			return out, err
		}
		var rows []struct{ Severity, N int64 }
		if err := s.read.SelectContext(ctx, &rows, s.read.Rebind(`
			SELECT severity, count(*) AS n
			FROM balde_buckets
			`+c.Where()+`
			GROUP BY severity`), c.Args...); err != nil {
			return nil, formatError("count buckets", err)
		}
		for _, r := range rows {
			out[throttle.Severity(r.Severity)] = r.N
		}
		return out, nil
	})
}

// ledgerQuery returns the query selecting sel from the rows q asks for, and
// its arguments: along the bucket's chain (walkChain, at most depth rows)
// when q names a key, else by q's other conditions followed by tail. ok is
// false when q names a policy that was never stored (nothing can match).
func (s *Store) ledgerQuery(ctx context.Context, q inspect.LedgerQuery, depth int, sel, tail string) (query string, args []any, ok bool, err error) {
	if q.Key != nil {
		return s.walkChain(ctx, q, depth, sel)
	}
	var c sqlkit.Conds
	if q.Policy != "" {
		id, known, err := s.lookupPolicy(ctx, q.Policy)
		if err != nil || !known {
			return "", nil, false, err
		}
		c.And(true, "policy_id = ?", id)
	}
	if len(q.Reasons) > 0 {
		reasons(&c, q.Reasons)
	}
	c.And(!q.Since.IsZero(), "at >= ?", sqltime.Nanos(q.Since))
	c.And(q.BeforeID > 0, "id < ?", q.BeforeID)
	return `SELECT ` + sel + ` FROM balde_token_ledger ` + c.Where() + tail, c.Args, true, nil
}

// Ledger implements inspect.Store.
func (s *Store) Ledger(ctx context.Context, q inspect.LedgerQuery) ([]throttle.LedgerEntry, error) {
	return retried(ctx, s, "ledger", func() ([]throttle.LedgerEntry, error) {
		limit := cmp.Or(max(q.Limit, 0), inspect.DefaultPageSize)
		depth := limit // without a filter on reasons, a walk is exactly the page
		if len(q.Reasons) > 0 {
			depth = maxWalk
		}
		query, args, ok, err := s.ledgerQuery(ctx, q, depth, ledgerColumns, ` ORDER BY id DESC`)
		if err != nil || !ok {
			return nil, err
		}
		rows, err := queryAll(ctx, s.read, s.read.Rebind(query+` LIMIT ?`), append(args, limit), scanLedgerRow)
		if err != nil {
			return nil, formatError("read ledger", err)
		}
		out := make([]throttle.LedgerEntry, 0, len(rows))
		for _, r := range rows {
			name, err := s.nameOf(ctx, r.key.policyID)
			if err != nil {
				return nil, err
			}
			out = append(out, r.entry(throttle.Key{Policy: name, Env: r.key.env, Identifier: r.key.identifier}))
		}
		return out, nil
	})
}

// maxWalk bounds how many rows of one bucket's chain a read walks.
const maxWalk = 1_000_000

// walkChain returns the query selecting sel from a walk along one bucket's
// ledger rows, newest first, from its latest row (or the row before
// BeforeID), stopping at Since, at another bucket's row or after depth
// rows, keeping the rows of q's reasons.
func (s *Store) walkChain(ctx context.Context, q inspect.LedgerQuery, depth int, sel string) (query string, args []any, ok bool, err error) {
	id, known, err := s.lookupPolicy(ctx, q.Key.Policy)
	if err != nil || !known {
		return "", nil, false, err
	}
	k := []any{id, q.Key.Env, q.Key.Identifier}
	start, startArgs := `(SELECT last_entry FROM balde_buckets WHERE policy_id = ? AND env = ? AND identifier = ?)`, k
	if q.BeforeID > 0 {
		start, startArgs = `(SELECT prev FROM balde_token_ledger WHERE id = ?)`, []any{q.BeforeID}
	}
	since := ""
	var sinceArgs []any
	if !q.Since.IsZero() {
		since, sinceArgs = " AND at >= ?", []any{sqltime.Nanos(q.Since)}
	}
	var rc sqlkit.Conds
	if len(q.Reasons) > 0 {
		reasons(&rc, q.Reasons)
	}
	query = `WITH RECURSIVE chain AS (
			SELECT ` + ledgerColumns + `, 1 AS depth
			FROM balde_token_ledger
			WHERE id = ` + start + ` AND policy_id = ? AND env = ? AND identifier = ?` + since + `
			UNION ALL
			SELECT l.id, l.policy_id, l.env, l.identifier, l.at, l.reason, l.delta, l.balance, l.n, l.prev, l.ref, c.depth + 1
			FROM balde_token_ledger AS l
			JOIN chain AS c ON l.id = c.prev
			WHERE l.policy_id = ? AND l.env = ? AND l.identifier = ? AND c.depth < ?` + strings.ReplaceAll(since, "at", "l.at") + `
		)
		SELECT ` + sel + `
		FROM chain
		` + rc.Where()
	return query, slices.Concat(startArgs, k, sinceArgs, k, []any{depth}, sinceArgs, rc.Args), true, nil
}

// CountLedger implements inspect.Store.
func (s *Store) CountLedger(ctx context.Context, q inspect.LedgerQuery) (int64, error) {
	return retried(ctx, s, "count ledger", func() (int64, error) {
		q.BeforeID = 0
		query, args, ok, err := s.ledgerQuery(ctx, q, maxWalk, `COALESCE(SUM(n), 0)`, "")
		if err != nil || !ok {
			return 0, err
		}
		var n int64
		err = s.read.QueryRowContext(ctx, s.read.Rebind(query), args...).Scan(&n)
		return n, formatError("count ledger", err)
	})
}

// PruneLedger implements throttle.Store: it deletes the longest run of
// oldest ids (insertion order) whose rows are all older than before, up to
// limit, stopping at the first younger row so its cost is bounded by limit;
// then, within the same limit, the refusal rows expired by their own time
// that lie after a younger row (pruneLateRefusals). A retried prune whose
// first try committed unseen deletes a further run of rows that are all
// older than before: as the caller asked, only the count it reports misses
// the first run.
func (s *Store) PruneLedger(ctx context.Context, before time.Time, limit int) (int64, error) {
	return retried(ctx, s, "prune ledger", func() (int64, error) {
		n, err := s.pruneLedgerRun(ctx, before, limit)
		if err == nil && n < int64(limit) {
			var late int64
			late, err = s.pruneLateRefusals(ctx, before, limit-int(n))
			n += late
		}
		return n, formatError("prune ledger", err)
	})
}

// pruneLateRefusals deletes up to limit refusal rows expired by their own
// time (a group once At+RefusalGroupSpan is before before), found through
// the balde_token_ledger_events index. The bucket's last_entry, then the
// next row of the chain, are pointed at the row before each first.
func (s *Store) pruneLateRefusals(ctx context.Context, before time.Time, limit int) (int64, error) {
	tx, err := s.write.BeginTxx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	cutoff, groupCutoff := sqltime.Nanos(before), sqltime.Nanos(before.Add(throttle.RefusalGroupSpan))
	// "reason NOT IN (1, 10)" repeats the partial index's predicate so that
	// both engines use it.
	var late []struct {
		ID         int64
		PolicyID   int64 `db:"policy_id"`
		Env        string
		Identifier string
	}
	if err := tx.SelectContext(ctx, &late, s.write.Rebind(`
		SELECT id, policy_id, env, identifier
		FROM balde_token_ledger
		WHERE reason IN (`+refusalReasonsSQL()+`) AND reason NOT IN (1, 10)
			AND at < ? AND (at < ? OR n > 1)
		ORDER BY id
		LIMIT ?`), groupCutoff, cutoff, limit); err != nil {
		return 0, err
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
		err := tx.QueryRowContext(ctx, readPrev, r.ID).Scan(&prev)
		if err == nil {
			_, err = tx.ExecContext(ctx, relinkBucket, r.ID, prev, r.PolicyID, r.Env, r.Identifier)
		}
		if err == nil {
			_, err = tx.ExecContext(ctx, relinkNext, prev, r.ID, r.ID)
		}
		if err == nil {
			_, err = tx.ExecContext(ctx, remove, r.ID)
		}
		if err != nil {
			return 0, err
		}
	}
	return int64(len(late)), tx.Commit()
}

// pruneLedgerRun deletes the run of oldest ids (see PruneLedger).
func (s *Store) pruneLedgerRun(ctx context.Context, before time.Time, limit int) (int64, error) {
	tx, err := s.write.BeginTxx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var rows []struct{ ID, At int64 }
	if err := tx.SelectContext(ctx, &rows, s.write.Rebind(`
		SELECT id, at
		FROM balde_token_ledger
		ORDER BY id
		LIMIT ?`), limit); err != nil {
		return 0, err
	}
	cutoff := sqltime.Nanos(before)
	n := 0
	for n < len(rows) && rows[n].At < cutoff {
		n++
	}
	if n == 0 {
		return 0, nil
	}
	if _, err := tx.ExecContext(ctx, s.write.Rebind(`DELETE FROM balde_token_ledger WHERE id <= ?`), rows[n-1].ID); err != nil {
		return 0, err
	}
	return int64(n), tx.Commit()
}
