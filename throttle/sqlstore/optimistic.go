package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/balde-throttle/balde/throttle"
)

// The optimistic write of Store.NonDurable on PostgreSQL (decision 0116):
// a batch whose every bucket row this process wrote last, and still
// remembers, is decided on the remembered rows and sent in ONE round trip
// (BEGIN, the settings, a check, the write, COMMIT) whose
// check locks the rows in key order and fails unless each still holds
// exactly the remembered state; if one does not (another process wrote
// it, an administrator reset, deleted or pruned it), the check fails, the
// server skips the write and COMMIT, the transaction rolls back with
// nothing applied, and the batch runs again on the locking path of
// pipeline.go, which remembers the rows anew.
//
// Exactness: a decision is a function of the rows' state and the
// transaction's instant. The write commits only if every row holds, under
// the lock the write takes, the state the decision read, so the result is
// the one the locking path would have had holding the lock at that
// instant. A key the process does not remember is taken for a key without
// a row, and the write inserts its row: the insert fails if a row exists,
// or if another transaction inserts one first. Credits (which read the
// ledger), deletes and ledger rows take the locking path.

// optimisticRows bounds the rows a store remembers: seed 004's 10,000
// client IPs, several times over.
const optimisticRows = 1 << 16

// rowCache is the bounded memory of the bucket rows the store's
// non-durable transactions last committed (or read under lock), each as
// stored, with the minute of its latest ledger row (headMinute). Safe for
// concurrent use. Two generations bound it: when the current one holds
// half of max rows it becomes the old one and the old one is forgotten; a
// row found in the old one moves to the current one.
type rowCache struct {
	mu       sync.Mutex
	max      int
	cur, old map[rowKey]bucketRow

	oneTrip, conflicts, locked atomic.Int64
}

func newRowCache(maxRows int) *rowCache {
	return &rowCache{max: maxRows, cur: make(map[rowKey]bucketRow), old: make(map[rowKey]bucketRow)}
}

// get returns the remembered rows of keys, in keys' order, and the keys
// not remembered.
func (c *rowCache) get(keys []rowKey) (rows []bucketRow, unknown []rowKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rows = make([]bucketRow, 0, len(keys))
	for _, k := range keys {
		r, ok := c.cur[k]
		if !ok {
			if r, ok = c.old[k]; !ok {
				unknown = append(unknown, k)
				continue
			}
			delete(c.old, k)
			c.putLocked(r)
		}
		rows = append(rows, r)
	}
	return rows, unknown
}

// remember stores the state of the rows of a committed transaction that
// loaded rows (locked, or remembered and checked) and wrote ws: each
// written row as written, each other loaded row as loaded. A row with
// new ledger rows is forgotten instead (its new head's id is the
// server's), and so is a deleted one.
func (c *rowCache) remember(loaded []bucketRow, ws *writeSet) {
	minute := make(map[rowKey]sql.NullInt64, len(loaded))
	for _, r := range loaded {
		minute[r.key] = r.headMinute
	}
	forget := make(map[rowKey]bool)
	for _, l := range ws.ledger {
		forget[l.key] = true
	}
	for _, k := range ws.deletes {
		forget[k] = true
	}
	written := make(map[rowKey]bool, len(ws.updates)+len(ws.inserts))
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rows := range [][]bucketRow{ws.updates, ws.inserts} {
		for _, r := range rows {
			written[r.key] = true
			if !forget[r.key] {
				// lastEntry is the head before the transaction (writeSet),
				// unchanged without ledger rows; so is its minute (a merge
				// adds to the head row of the same minute).
				r.headMinute = minute[r.key]
				c.putLocked(r)
			}
		}
	}
	for _, r := range loaded {
		if !written[r.key] && !forget[r.key] {
			c.putLocked(r)
		}
	}
	for k := range forget {
		delete(c.cur, k)
		delete(c.old, k)
	}
}

// forget drops keys' rows.
func (c *rowCache) forget(keys []rowKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		delete(c.cur, k)
		delete(c.old, k)
	}
}

func (c *rowCache) putLocked(r bucketRow) {
	if _, ok := c.cur[r.key]; !ok && len(c.cur) >= c.max/2 {
		c.old, c.cur = c.cur, make(map[rowKey]bucketRow, c.max/2)
	}
	c.cur[r.key] = r
	delete(c.old, r.key)
}

// OptimisticStats counts the batches of a store's NonDurable view on
// PostgreSQL (its optimistic write, decision 0116).
type OptimisticStats struct {
	// OneTrip batches committed in one round trip on remembered rows.
	OneTrip int64
	// Conflicts are one-round-trip writes that found a row changed by
	// someone else and rolled back (each then ran on the locking path).
	Conflicts int64
	// Locked batches ran on the two-round-trip locking path: a row not
	// remembered, a credit, an insert, a delete or a ledger row, or a
	// conflict.
	Locked int64
}

// OptimisticStats returns the counts of NonDurable's batches so far; zero
// on SQLite and before NonDurable is first called.
func (s *Store) OptimisticStats() OptimisticStats {
	c := s.rows()
	if c == nil {
		return OptimisticStats{}
	}
	return OptimisticStats{OneTrip: c.oneTrip.Load(), Conflicts: c.conflicts.Load(), Locked: c.locked.Load()}
}

// rows returns the store's row cache, nil when NonDurable never made one.
func (s *Store) rows() *rowCache { return s.fast.Load() }

// updateOptimistic runs a non-durable batch of keys in one round trip on
// remembered rows, a key not remembered taken for one without a row
// (a full bucket), which the write inserts. done is false when the batch
// must run on the locking path: apply failed (on rows that may be stale),
// a write other than updates of remembered rows and inserts of all the
// others, or a row that changed or exists (then the batch's keys are
// forgotten). Otherwise err is the batch's outcome (ErrCommitInDoubt, an
// error of the connection).
//
// The clock is read before the write takes the locks, unlike on the
// locking path; it is the instant the decision runs at all the same: a
// row's state is the one this process committed last, at an instant read
// before this one, and the write commits only if nobody else wrote the
// row since, so no transaction on the row ran at an instant after this
// one's. (A wall clock stepping back is clamped by the bucket math on
// either path.)
func (s *Store) updateOptimistic(ctx context.Context, p Pipeliner, conn *sql.Conn, c *rowCache, keys []throttle.Key, apply func(*throttle.Tx) error) (done bool, err error) {
	byRow, rowKeys, _ := s.rowKeys(keys, nil)
	if len(rowKeys) == 0 {
		return false, nil
	}
	rows, unknown := c.get(rowKeys)
	t, head, err := s.newTx(rows, nil, byRow)
	if err != nil {
		return false, nil // a row this process cannot read back: lock it
	}
	if err := apply(t); err != nil {
		// The remembered rows may be stale, and the error theirs: the
		// locking path runs apply again on the rows as they are and gives
		// the batch its answer.
		return false, nil
	}
	headMinute := make(map[rowKey]int64)
	for _, r := range rows {
		if r.headMinute.Valid {
			headMinute[r.key] = r.headMinute.Int64
		}
	}
	ws := s.writeSet(t, head, headMinute)
	if len(ws.deletes)+len(ws.ledger)+len(ws.merges) > 0 || len(ws.inserts) != len(unknown) {
		// Every key not remembered must be inserted: its absence is
		// checked only by the insert's unique index.
		return false, nil
	}
	load := []Query{{SQL: optimisticSettingsSQL}}
	if len(rows) > 0 {
		load = append(load, Query{SQL: optimisticCheckSQL, Args: append(bucketArrays(rows), int64(len(rows)))})
	}
	if !ws.empty() {
		load = append(load, Query{SQL: optimisticWriteSQL, Args: append(bucketArrays(ws.updates), bucketArrays(ws.inserts)...)})
	}
	conflict := false
	err = p.Pipeline(ctx, conn, &Pipeline{
		Load: load,
		Scan: func(int, Rows) error { return nil },
		Outcome: func(writeErr, commitErr, closeErr error) error {
			class := s.driver.Classify(writeErr)
			switch {
			case writeErr != nil && class&ClassServer != 0:
				// The server refused a statement: the COMMIT behind it was
				// skipped, nothing applied. A changed row (the division by
				// zero of optimisticCheckSQL) or a row that exists (the
				// insert's unique violation) are the usual causes; a lost
				// race (deadlock) or anything else is left to the locking
				// path too.
				conflict = true
				return writeErr
			case writeErr != nil && class&ClassTransient != 0:
				// Not sent (a connection that could not be made or was
				// found closed): retried like any transient error.
				return writeErr
			}
			return pipelineOutcome(s.driver, writeErr, commitErr, closeErr)
		},
	})
	switch {
	case errors.Is(err, ErrNoPipeline):
		return false, nil
	case conflict:
		c.conflicts.Add(1)
		c.forget(rowKeys)
		s.logger.Debug("optimistic write found a row changed; locking", "error", err)
		return false, nil
	case err != nil:
		c.forget(rowKeys)
		return true, err
	}
	c.oneTrip.Add(1)
	c.remember(rows, ws)
	return true, nil
}

// optimisticSettingsSQL is asyncCommitSQL (the transaction is
// NonDurable's) and has the transaction's statements run on generic plans:
// PostgreSQL otherwise plans optimisticCheckSQL and optimisticWriteSQL
// anew at every execution (a custom plan knows the arrays' lengths, so it
// always looks cheaper than the generic one), and planning took 2 to 5
// times as long as running them (EXPLAIN ANALYZE: 0.2 ms and 0.4–2 ms of
// planning for 0.08 ms and 0.2 ms of execution, a batch of 3 keys, 10,000
// rows). Their generic plans are the custom ones: each array joined to the
// primary key by a nested loop. Both settings end with the transaction.
const optimisticSettingsSQL = `SELECT set_config('synchronous_commit', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)`

// optimisticCheckSQL locks, in key order, the bucket rows of $1–$15 (the
// remembered rows: key and every state column) that still hold exactly
// that state (IS NOT DISTINCT FROM: the nullable columns, last_entry the
// ledger head among them) and divides by zero — failing the statement, so
// the transaction rolls back and the write and COMMIT behind it are
// skipped — unless it locked $16 rows: all of them. FOR UPDATE waits for a
// row another transaction holds, then checks the row's latest version. The
// locks are taken in the order of the locking path (pgLoadSQL), before
// any insert, so the two paths never deadlock each other. The divisor is
// not constant, so the planner does not fold it.
//
// It is a statement of its own, not a CTE of the write: a page is pruned
// of its dead row versions (which keeps updates HOT and the table small)
// only when no scan holds a pin on it, and a lock in the same statement
// as the update kept the pages pinned (the table grew 20-fold).
const optimisticCheckSQL = `
	WITH e AS MATERIALIZED (
		SELECT b.policy_id
		FROM balde_buckets AS b
		JOIN unnest($1::int[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[],
		            $7::bigint[], $8::smallint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bytea[],
		            $13::bigint[], $14::bigint[], $15::int[])
		     AS x(` + bucketColumns + `)
		  ON b.policy_id = x.policy_id AND b.env = x.env AND b.identifier = x.identifier
		WHERE (b.tokens, b.carry, b.refilled_at, b.send_count, b.severity, b.last_sent_at, b.last_entry,
		       b.blocked_until, b.spent, b.next_at, b.held_until, b.block_level)
		      IS NOT DISTINCT FROM
		      (x.tokens, x.carry, x.refilled_at, x.send_count, x.severity, x.last_sent_at, x.last_entry,
		       x.blocked_until, x.spent, x.next_at, x.held_until, x.block_level)
		ORDER BY b.policy_id, b.env, b.identifier
		FOR UPDATE OF b
	)
	SELECT 1 / (CASE WHEN count(*) = $16::bigint THEN 1 ELSE 0 END) FROM e`

// optimisticWriteSQL updates the rows of $1–$15 (new states; last_entry
// stays), which optimisticCheckSQL locked, and inserts the rows of
// $16–$30, failing with a unique violation on a row that exists. It is
// writeSQL without the ledger, which the optimistic write never has: a
// statement of two parts instead of eight, and none whose generic plan
// could scan the ledger.
const optimisticWriteSQL = `
	WITH u AS (
		UPDATE balde_buckets AS b
		SET tokens = x.tokens,
		    carry = x.carry,
		    refilled_at = x.refilled_at,
		    send_count = x.send_count,
		    severity = x.severity,
		    last_sent_at = x.last_sent_at,
		    blocked_until = x.blocked_until,
		    spent = x.spent,
		    next_at = x.next_at,
		    held_until = x.held_until,
		    block_level = x.block_level
		FROM unnest($1::int[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[],
		            $7::bigint[], $8::smallint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bytea[],
		            $13::bigint[], $14::bigint[], $15::int[])
		     AS x(` + bucketColumns + `)
		WHERE b.policy_id = x.policy_id AND b.env = x.env AND b.identifier = x.identifier
	)
	INSERT INTO balde_buckets (` + bucketColumns + `)
	SELECT *
	FROM unnest($16::int[], $17::text[], $18::text[], $19::bigint[], $20::bigint[], $21::bigint[],
	            $22::bigint[], $23::smallint[], $24::bigint[], $25::bigint[], $26::bigint[], $27::bytea[],
	            $28::bigint[], $29::bigint[], $30::int[])`
