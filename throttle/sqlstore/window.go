package sqlstore

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// aggregateLag is how far before its row's neighbours in the chain an
// aggregated take row's time may lie: it carries the minute it began.
const aggregateLag = time.Minute

// ledgerWindowSQL folds one bucket's ledger rows into the slots of a window.
//
// The rows are found by walking the bucket's chain (prev) from its latest
// row by primary key, newest first, as bucketLedger does: the ledger has no
// index by bucket or time (docs/decisions/0003-ledger-layout.md), so the
// walk reads the bucket's rows of the window and nothing else, whatever the
// size of the ledger. It stops at the first row older than the window's
// start less aggregateLag (an aggregated row may be up to a minute older
// than the row written before it), at a row of another bucket, or after
// MaxWindowRows rows. The outer query groups by slot (-1 for the rows
// before the window, which only tell whether the walk reached its start),
// and joins each slot's first and last balance-changing rows back by
// primary key for the balance before and after them: the answer has at
// most one row per slot, plus one.
//
// Parameters: the key three times (bucket head, first row, each step), the
// walk's stop time and depth bound; then from, to, the last slot's index,
// from, width, to.
func ledgerWindowSQL() string {
	refused := refusalReasonsSQL()
	return `
		WITH RECURSIVE chain AS (
			SELECT id, at, reason, delta, balance, n, prev, 1 AS depth
			FROM balde_token_ledger
			WHERE id = (SELECT last_entry FROM balde_buckets WHERE policy_id = ? AND env = ? AND identifier = ?)
				AND policy_id = ? AND env = ? AND identifier = ?
			UNION ALL
			SELECT l.id, l.at, l.reason, l.delta, l.balance, l.n, l.prev, c.depth + 1
			FROM chain AS c
			JOIN balde_token_ledger AS l ON l.id = c.prev
			WHERE c.at >= ? AND c.depth < ?
				AND l.policy_id = ? AND l.env = ? AND l.identifier = ?
		)
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

// ledgerWindow is LedgerWindow without its retries; LedgerWindow implements
// throttle.Store.
func (s *Store) ledgerWindow(ctx context.Context, q throttle.LedgerWindowQuery) (throttle.LedgerWindow, error) {
	w := throttle.LedgerWindow{Query: q}
	id, known, err := s.lookupPolicy(ctx, q.Key.Policy)
	if err != nil || !known {
		return w, err
	}
	return s.foldWindow(ctx, q, id, throttle.MaxWindowRows)
}

// foldWindow runs ledgerWindowSQL for q on the bucket of policy id, walking
// at most maxRows rows.
func (s *Store) foldWindow(ctx context.Context, q throttle.LedgerWindowQuery, policyID int64, maxRows int) (throttle.LedgerWindow, error) {
	w := throttle.LedgerWindow{Query: q}
	k := []any{policyID, q.Key.Env, q.Key.Identifier}
	from, width := nanos(q.From), int64(q.Width())
	var args []any
	args = append(append(append(args, k...), k...), nanos(q.From.Add(-aggregateLag)), maxRows)
	to := nanos(q.To)
	args = append(append(args, k...), from, to, q.Slots-1, from, width, to)
	rows, err := s.read.QueryContext(ctx, s.read.Rebind(ledgerWindowSQL()), args...)
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
		if depth >= int64(maxRows) {
			w.Partial = true
		}
		sl := throttle.LedgerSlot{
			Index:   int(slot),
			Start:   q.From.Add(time.Duration(slot) * q.Width()),
			Changes: changes, Events: events,
			Refused: refused,
		}
		if firstRefused.Valid {
			sl.FirstRefused = fromNanos(firstRefused.Int64)
		}
		if changes > 0 {
			sl.First, sl.Open = fromNanos(firstAt.Int64), open.Int64
			sl.Last, sl.Close = fromNanos(lastAt.Int64), closeBal.Int64
			sl.Min, sl.Max = minBal.Int64, maxBal.Int64
			sl.LastReason = throttle.LedgerReason(lastReason.Int64)
			if lastReason.Int64 == reasonMinuteOfTakes {
				sl.LastReason = throttle.LedgerTake
			}
		}
		w.Slots = append(w.Slots, sl)
	}
	return w, formatError("read ledger window", rows.Err())
}
