package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore/internal/driverkit"
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

// optimisticRows bounds the rows a store remembers: the 10,000 active
// client IPs the inbound limiter is sized for, several times over.
const optimisticRows = 1 << 16

// rowCache is the bounded memory of the bucket rows the store's
// non-durable transactions last committed (or read under lock), each as
// stored, with the minute of its latest ledger row (headMinute). Safe for
// concurrent use. Two generations bound it: when the current one holds
// half of max rows it becomes the old one and the old one is forgotten; a
// row found in the old one moves to the current one.
//
// A key whose remembered row another process changed (a one-round-trip
// write failed its check) is contended: it takes the locking path, so that
// a key several processes share costs their locking path only, not a
// failed round trip each time. It is no longer contended once the locking
// path found its row as this process left it in as many batches in a row
// as its strikes require (2, doubling at each new contention up to 64);
// the mark ages out with the generations like the rows.
//
// A key the store does not remember either has no row (a new client: the
// one-round-trip write inserts it) or has one this process never saw (after
// a restart, or written by another process): then the insert fails, and
// the batch costs a failed round trip and an ERROR in the server's log
// before its two locking ones, where the locking path would have cost two.
// So the keys not remembered take the one-round-trip path only while no
// more of those the store met lately had a row than had none (found,
// absent: decayed counts); a store that has just opened starts on the
// locking path (found is 1).
type rowCache struct {
	mu       sync.Mutex
	max      int
	cur, old map[rowKey]cachedRow

	found, absent int64

	oneTrip, conflicts, locked atomic.Int64
}

// cachedRow is a rowCache entry.
type cachedRow struct {
	row bucketRow
	// known: row is the state this process last committed or read (false:
	// only the contention is remembered).
	known bool
	// contended: a check found the row changed by someone else; calm
	// counts the locking batches in a row since then that found it as
	// this process left it; strikes, the contentions.
	contended     bool
	calm, strikes int
}

// calmNeeded is the number of quiet locking batches after which a
// contended key takes the one-round-trip path again.
func (e cachedRow) calmNeeded() int { return min(1<<e.strikes, 64) }

// The count of found keys a store starts with, and the decay bound of
// found and absent.
const (
	newcomersStartFound = 1
	newcomersDecayAt    = 1024
)

func newRowCache(maxRows int) *rowCache {
	return &rowCache{max: maxRows, cur: make(map[rowKey]cachedRow), old: make(map[rowKey]cachedRow), found: newcomersStartFound}
}

// get returns the remembered rows of keys, in keys' order, and the keys
// not remembered; lock is true when the batch should take the locking
// path: a key is contended, or keys are not remembered while more of the
// keys not remembered lately had a row than had none.
func (c *rowCache) get(keys []rowKey) (rows []bucketRow, unknown []rowKey, lock bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rows = make([]bucketRow, 0, len(keys))
	for _, k := range keys {
		e, ok := c.lookupLocked(k)
		switch {
		case !ok:
			unknown = append(unknown, k)
		case e.contended || !e.known:
			lock = true
		default:
			rows = append(rows, e.row)
		}
	}
	if len(unknown) > 0 && c.found > c.absent {
		lock = true
	}
	return rows, unknown, lock
}

// lookupLocked returns k's entry, moving it to the current generation.
func (c *rowCache) lookupLocked(k rowKey) (cachedRow, bool) {
	if e, ok := c.cur[k]; ok {
		return e, true
	}
	e, ok := c.old[k]
	if ok {
		delete(c.old, k)
		c.putLocked(k, e)
	}
	return e, ok
}

// newcomers counts keys not remembered that had a row (found) or none
// (absent).
func (c *rowCache) newcomers(found, absent int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.newcomersLocked(found, absent)
}

func (c *rowCache) newcomersLocked(found, absent int) {
	c.found += int64(found)
	c.absent += int64(absent)
	if c.found+c.absent >= newcomersDecayAt {
		c.found, c.absent = c.found/2, c.absent/2
	}
}

// remember stores the state of the rows of a committed transaction that
// loaded rows (read under lock when locked, else remembered and checked)
// and wrote ws: each written row as written, each other loaded row as
// loaded. A row with new ledger rows is forgotten instead (its new head's
// id is the server's), and so is a deleted one; a contended key keeps its
// mark. After a locking read, the keys it did not remember are counted
// (newcomers), and a contended key whose row was as this process left it
// counts towards its calm.
func (c *rowCache) remember(loaded []bucketRow, ws *writeSet, locked bool, keys []rowKey) {
	byKey := make(map[rowKey]bucketRow, len(loaded))
	for _, r := range loaded {
		byKey[r.key] = r
	}
	forget := make(map[rowKey]bool)
	for _, l := range ws.ledger {
		forget[l.key] = true
	}
	for _, k := range ws.deletes {
		forget[k] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if locked {
		found, absent := 0, 0
		for _, k := range keys {
			e, ok := c.lookupLocked(k)
			l, loadedOK := byKey[k]
			switch {
			case !ok && loadedOK:
				found++
			case !ok:
				absent++
			case e.contended && loadedOK && e.known && sameState(e.row, l):
				e.calm++
				if e.calm >= e.calmNeeded() {
					e.contended, e.calm = false, 0
				}
				c.putLocked(k, e)
			case e.contended:
				e.calm = 0
				c.putLocked(k, e)
			}
		}
		c.newcomersLocked(found, absent)
	}
	put := func(r bucketRow) {
		e, _ := c.lookupLocked(r.key)
		if forget[r.key] {
			if e.contended {
				e.known = false
				c.putLocked(r.key, e)
			} else {
				delete(c.cur, r.key)
			}
			return
		}
		e.row, e.known = r, true
		c.putLocked(r.key, e)
	}
	written := make(map[rowKey]bool, len(ws.updates)+len(ws.inserts))
	for _, rows := range [][]bucketRow{ws.updates, ws.inserts} {
		for _, r := range rows {
			written[r.key] = true
			// lastEntry is the head before the transaction (writeSet),
			// unchanged without ledger rows; so is its minute (a merge
			// adds to the head row of the same minute).
			r.headMinute = byKey[r.key].headMinute
			put(r)
		}
	}
	for _, r := range loaded {
		if !written[r.key] {
			put(r)
		}
	}
	for k := range forget {
		if !written[k] {
			if _, wasLoaded := byKey[k]; !wasLoaded {
				c.forgetLocked(k)
			}
		}
	}
}

// contend marks keys contended: each takes the locking path until it calms.
func (c *rowCache) contend(keys []rowKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		e, _ := c.lookupLocked(k)
		if !e.contended {
			e.strikes = min(e.strikes+1, 6)
		}
		e.contended, e.calm = true, 0
		c.putLocked(k, e)
	}
}

// forget drops keys' rows; a contended key keeps its mark.
func (c *rowCache) forget(keys []rowKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		c.forgetLocked(k)
	}
}

func (c *rowCache) forgetLocked(k rowKey) {
	e, ok := c.lookupLocked(k)
	if !ok {
		return
	}
	if e.contended {
		e.known, e.calm = false, 0
		c.putLocked(k, e)
		return
	}
	delete(c.cur, k)
}

func (c *rowCache) putLocked(k rowKey, e cachedRow) {
	if _, ok := c.cur[k]; !ok && len(c.cur) >= c.max/2 {
		c.old, c.cur = c.cur, make(map[rowKey]cachedRow, c.max/2)
	}
	c.cur[k] = e
	delete(c.old, k)
}

// sameState reports whether a and b hold the same state, every column
// optimisticCheckSQL compares.
func sameState(a, b bucketRow) bool {
	return a.tokens == b.tokens && a.carry == b.carry && a.refilledAt == b.refilledAt && a.sendCount == b.sendCount &&
		a.severity == b.severity && a.lastSentAt == b.lastSentAt && a.lastEntry == b.lastEntry &&
		a.blockedUntil == b.blockedUntil && bytes.Equal(a.spent, b.spent) && a.nextAt == b.nextAt &&
		a.heldUntil == b.heldUntil && a.blockLevel == b.blockLevel
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
	// remembered (while most such rows existed), a contended key, a
	// credit, a delete or a ledger row, an error of the rules on
	// remembered rows, or a conflict.
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
// others, a contended key, keys not remembered while most such keys had
// rows (rowCache), or a row that changed (then the remembered keys are
// marked contended) or exists. Otherwise err is the batch's outcome (ErrCommitInDoubt, an
// error of the connection).
//
// The clock is read before the write takes the locks, unlike on the
// locking path; it is the instant the decision runs at all the same: a
// row's state is the one this process committed last, at an instant read
// before this one, and the write commits only if nobody else wrote the
// row since, so no transaction on the row ran at an instant after this
// one's. (A wall clock stepping back is clamped by the bucket math on
// either path.)
func (s *Store) updateOptimistic(ctx context.Context, p driverkit.Pipeliner, conn *sql.Conn, c *rowCache, keys []throttle.Key, apply func(*throttle.Tx) error) (done bool, err error) {
	byRow, rowKeys, _ := s.rowKeys(keys, nil)
	if len(rowKeys) == 0 {
		return false, nil
	}
	rows, unknown, lock := c.get(rowKeys)
	if lock {
		return false, nil
	}
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
	load := []driverkit.Query{{SQL: optimisticSettingsSQL}}
	if len(rows) > 0 {
		load = append(load, driverkit.Query{SQL: optimisticCheckSQL, Args: append(bucketArrays(rows), int64(len(rows)))})
	}
	if !ws.empty() {
		load = append(load, driverkit.Query{SQL: optimisticWriteSQL, Args: append(bucketArrays(ws.updates), bucketArrays(ws.inserts)...)})
	}
	// checked: the remembered rows passed the check (its one row came
	// back), so a statement that fails after it is the insert of a key
	// that has a row.
	checked := len(rows) == 0
	conflict := false
	err = p.Pipeline(ctx, conn, &driverkit.Pipeline{
		Load: load,
		Scan: func(i int, r driverkit.Rows) error {
			if i == 1 && len(rows) > 0 {
				for r.Next() {
					checked = true
				}
			}
			return nil
		},
		Outcome: func(writeErr, commitErr, closeErr error) error {
			class := s.driver.Classify(writeErr)
			switch {
			case writeErr != nil && class&driverkit.ClassTimeout != 0:
				// The check waited out lock_timeout on a row another
				// transaction holds (a stopped process, a long admin
				// transaction): nothing applied, and the locking path would
				// wait for the same lock again. The batch's answer.
				return writeErr
			case writeErr != nil && class&driverkit.ClassServer != 0:
				// The server refused a statement: the COMMIT behind it was
				// skipped, nothing applied. A changed row (the division by
				// zero of optimisticCheckSQL) or a row that exists (the
				// insert's unique violation) are the usual causes; a lost
				// race (deadlock) or anything else is left to the locking
				// path too.
				conflict = true
				return writeErr
			case writeErr != nil && class&driverkit.ClassTransient != 0:
				// Not sent (a connection that could not be made or was
				// found closed): retried like any transient error.
				return writeErr
			}
			return pipelineOutcome(s.driver, writeErr, commitErr, closeErr)
		},
	})
	switch {
	case errors.Is(err, driverkit.ErrNoPipeline):
		return false, nil
	case conflict:
		c.conflicts.Add(1)
		if !checked {
			// A remembered row changed (or the check failed otherwise):
			// another process may share these keys.
			remembered := make([]rowKey, len(rows))
			for i, r := range rows {
				remembered[i] = r.key
			}
			c.contend(remembered)
		}
		s.logger.Debug("optimistic write found a row changed or existing; locking", "error", err)
		return false, nil
	case err != nil:
		c.forget(rowKeys)
		return true, err
	}
	c.oneTrip.Add(1)
	c.newcomers(0, len(unknown))
	c.remember(rows, ws, false, nil)
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
var optimisticCheckSQL = `
	WITH e AS MATERIALIZED (
		SELECT b.policy_id
		FROM balde_buckets AS b
		JOIN ` + bucketUnnest(1) + `
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
var optimisticWriteSQL = `
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
		FROM ` + bucketUnnest(1) + `
		WHERE b.policy_id = x.policy_id AND b.env = x.env AND b.identifier = x.identifier
	)
	INSERT INTO balde_buckets (` + bucketColumns + `)
	SELECT *
	FROM ` + bucketUnnest(16)
