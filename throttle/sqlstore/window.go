package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/internal/sqltime"
	"github.com/balde-throttle/balde/throttle"
)

// aggregateLag is how far an aggregated take row's time (its minute's
// start) may lie before its neighbours in the chain.
const aggregateLag = time.Minute

// The window's rows are read in one of two ways, both by primary key only
// (the ledger has no index by bucket or time:
// docs/decisions/0003-ledger-layout.md). walkCTE walks the bucket's chain
// from its latest row, newest first, stopping at the first row older than
// the window's start less aggregateLag that is not a refusal row (refusals
// answered from memory are written late, stamped with the last one's time),
// at a row of another bucket, or at a depth bound. rangeCTE reads the
// window's id range (ids follow time), keeping the bucket's rows: cheaper
// when at least one row in ten is the bucket's, which a walk of the newest
// windowSample rows tells. Both yield chain(id, at, reason, delta, balance,
// n, depth).

// walkCTE's parameters: the head id, the key, the stop time, the depth
// bound, the key.
var walkCTE = `
		WITH RECURSIVE chain AS (
			SELECT id, at, reason, delta, balance, n, prev, 1 AS depth
			FROM balde_token_ledger
			WHERE id = ? AND policy_id = ? AND env = ? AND identifier = ?
			UNION ALL
			SELECT l.id, l.at, l.reason, l.delta, l.balance, l.n, l.prev, c.depth + 1
			FROM chain AS c
			JOIN balde_token_ledger AS l ON l.id = c.prev
			WHERE (c.at >= ? OR c.reason IN (` + refusalReasonsSQL() + `)) AND c.depth < ?
				AND l.policy_id = ? AND l.env = ? AND l.identifier = ?
		)`

// rangeCTE's parameters: the first and last ids, the key.
const rangeCTE = `
		WITH chain AS (
			SELECT id, at, reason, delta, balance, n, 0 AS depth
			FROM balde_token_ledger
			WHERE id BETWEEN ? AND ? AND policy_id = ? AND env = ? AND identifier = ?
		)`

// windowSample is how many of a bucket's newest rows are walked to tell
// how busy it is.
const windowSample = 1000

// ledgerWindowSQL folds the rows of chain into the slots of a window (slot
// -1: the rows before it, which tell whether a walk reached its start),
// joining each slot's first and last balance-changing rows back for the
// balance before and after them. Parameters after the CTE's: from, to, the
// last slot's index, from, width, to.
func ledgerWindowSQL(cte string) string {
	refused := refusalReasonsSQL()
	return cte + `
		SELECT
			s.slot,
			s.changes,
			s.events,
			s.min_balance,
			s.max_balance,
			s.refused,
			s.first_refused,
			s.depth,
			f.at,
			f.balance - f.delta,
			l.at,
			l.balance,
			l.reason
		FROM (
			SELECT
				slot,
				SUM(CASE WHEN refusal = 1 THEN 0 ELSE 1 END) AS changes,
				SUM(CASE WHEN refusal = 1 THEN 0 ELSE n END) AS events,
				MIN(CASE WHEN refusal = 0 THEN balance END) AS min_balance,
				MAX(CASE WHEN refusal = 0 THEN balance END) AS max_balance,
				SUM(CASE WHEN refusal = 1 THEN n ELSE 0 END) AS refused,
				MIN(CASE WHEN refusal = 1 THEN at END) AS first_refused,
				MIN(CASE WHEN refusal = 0 THEN id END) AS first_id,
				MAX(CASE WHEN refusal = 0 THEN id END) AS last_id,
				MAX(depth) AS depth
			FROM (
				SELECT
					CASE WHEN at < ? THEN -1 WHEN at >= ? THEN ? ELSE (at - ?) / ? END AS slot,
					CASE WHEN reason IN (` + refused + `) THEN 1 ELSE 0 END AS refusal,
					id,
					at,
					balance,
					n,
					depth
				FROM chain
				WHERE at <= ?
			) AS rows
			GROUP BY slot
		) AS s
		LEFT JOIN balde_token_ledger AS f ON f.id = s.first_id
		LEFT JOIN balde_token_ledger AS l ON l.id = s.last_id
		ORDER BY s.slot`
}

// refusalReasonsSQL is throttle.RefusalReasons as a SQL list ("6, 7, 8").
func refusalReasonsSQL() string {
	var in []string
	for _, r := range throttle.RefusalReasons {
		in = append(in, strconv.Itoa(int(r)))
	}
	return strings.Join(in, ", ")
}

// LedgerWindow implements inspect.Store: it walks the bucket's chain, or
// reads the window's id range when the bucket is busy (see walkCTE).
func (s *Store) LedgerWindow(ctx context.Context, q inspect.LedgerWindowQuery) (inspect.LedgerWindow, error) {
	return retried(ctx, s, "ledger window", func() (inspect.LedgerWindow, error) {
		w := inspect.LedgerWindow{Query: q}
		policyID, known, err := s.lookupPolicy(ctx, q.Key.Policy)
		if err != nil || !known {
			return w, err
		}
		k := []any{policyID, q.Key.Env, q.Key.Identifier}
		var head sql.NullInt64
		err = s.read.QueryRowContext(ctx, s.read.Rebind(`
			SELECT last_entry
			FROM balde_buckets
			WHERE policy_id = ? AND env = ? AND identifier = ?`), k...).Scan(&head)
		if errors.Is(err, sql.ErrNoRows) || err == nil && !head.Valid {
			return w, nil
		}
		if err != nil {
			return w, formatError("read ledger window", err)
		}
		stop := sqltime.Nanos(q.From.Add(-aggregateLag))
		walk := append(append(append([]any{head.Int64}, k...), stop, windowSample), k...)
		var sampled, oldest int64
		err = s.read.QueryRowContext(ctx, s.read.Rebind(walkCTE+`
			SELECT COUNT(*), COALESCE(MIN(id), 0) FROM chain`), walk...).Scan(&sampled, &oldest)
		if err != nil {
			return w, formatError("read ledger window", err)
		}
		if sampled < windowSample || sampled*10 < head.Int64-oldest+1 {
			// A quiet bucket (or a window of few rows): walk its chain.
			walk[len(walk)-4] = inspect.MaxWindowRows
			return s.foldWindow(ctx, q, walkCTE, walk, inspect.MaxWindowRows)
		}
		// A busy bucket: read the window's id range, at most MaxWindowRows ids.
		first, err := s.ledgerIDAt(ctx, stop, head.Int64)
		if err != nil {
			return w, err
		}
		partial := head.Int64-first+1 > inspect.MaxWindowRows
		if partial {
			first = head.Int64 - inspect.MaxWindowRows + 1
		}
		w, err = s.foldWindow(ctx, q, rangeCTE, append([]any{first, head.Int64}, k...), inspect.MaxWindowRows)
		w.Partial = w.Partial || partial
		return w, err
	})
}

// ledgerIDAt returns the smallest ledger id, at most head, of a row at or
// after t (a time in nanoseconds), by a binary search on the primary key:
// ids follow insertion order, which follows time
// (docs/decisions/0003-ledger-layout.md). A row written out of time order
// (two processes' clocks disagreeing) may land on the wrong side.
func (s *Store) ledgerIDAt(ctx context.Context, t, head int64) (int64, error) {
	var lo int64
	if err := s.read.QueryRowContext(ctx, `SELECT COALESCE(MIN(id), 0) FROM balde_token_ledger`).Scan(&lo); err != nil {
		return 0, formatError("read ledger window", err)
	}
	next := s.read.Rebind(`
		SELECT id, at
		FROM balde_token_ledger
		WHERE id >= ?
		ORDER BY id
		LIMIT 1`)
	// Search [lo, hi); ans is the best found so far. Ids may have gaps:
	// every step shrinks the range whether or not a row lies in its upper half.
	ans := head
	for hi := head; lo < hi; {
		mid := lo + (hi-lo)/2
		var id, at int64
		if err := s.read.QueryRowContext(ctx, next, mid).Scan(&id, &at); err != nil {
			return 0, formatError("read ledger window", err)
		}
		switch {
		case id >= hi: // no row in [mid, hi)
			hi = mid
		case at >= t:
			ans, hi = id, mid
		default:
			lo = id + 1
		}
	}
	return ans, nil
}

// foldWindow runs ledgerWindowSQL over cte (with its args) for q; a row at
// depth maxDepth means the walk stopped before the window's start.
func (s *Store) foldWindow(ctx context.Context, q inspect.LedgerWindowQuery, cte string, cteArgs []any, maxDepth int) (inspect.LedgerWindow, error) {
	w := inspect.LedgerWindow{Query: q}
	from, to, width := sqltime.Nanos(q.From), sqltime.Nanos(q.To), int64(q.Width())
	args := append(cteArgs, from, to, q.Slots-1, from, width, to)
	rows, err := s.read.QueryContext(ctx, s.read.Rebind(ledgerWindowSQL(cte)), args...)
	if err != nil {
		return w, formatError("read ledger window", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			slot, changes, events, refused, depth int64
			minBal, maxBal, firstRefused          sql.NullInt64
			firstAt, open, lastAt, closeBal       sql.NullInt64
			lastReason                            sql.NullInt64
		)
		if err := rows.Scan(&slot, &changes, &events, &minBal, &maxBal, &refused, &firstRefused, &depth,
			&firstAt, &open, &lastAt, &closeBal, &lastReason); err != nil {
			return w, formatError("read ledger window", err)
		}
		if slot < 0 {
			continue // rows before the window: the walk reached its start
		}
		if depth >= int64(maxDepth) {
			w.Partial = true
		}
		sl := inspect.LedgerSlot{
			Index:   int(slot),
			Start:   q.From.Add(time.Duration(slot) * q.Width()),
			Changes: changes, Events: events,
			Refused:      refused,
			FirstRefused: sqltime.NullTime(firstRefused),
		}
		if changes > 0 {
			sl.First, sl.Open = sqltime.Time(firstAt.Int64), open.Int64
			sl.Last, sl.Close = sqltime.Time(lastAt.Int64), closeBal.Int64
			sl.Min, sl.Max = minBal.Int64, maxBal.Int64
			sl.LastReason = readReason(lastReason.Int64)
		}
		w.Slots = append(w.Slots, sl)
	}
	return w, formatError("read ledger window", rows.Err())
}
