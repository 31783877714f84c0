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

// The optimistic write of Store.NonDurable on PostgreSQL: a batch on rows
// this process remembers is sent in one round trip that commits only if
// they still hold the remembered state, else the batch runs on the locking
// path (pipeline.go); see docs/decisions/0116-optimistic-inbound-write-postgres.md.

// optimisticRows bounds the rows a store remembers: the 10,000 active
// client IPs the inbound limiter is sized for, several times over.
const optimisticRows = 1 << 16

// rowCache is the bounded memory of the bucket rows the store's
// non-durable transactions last committed (or read under lock), with the
// minute of each one's latest ledger row, in two generations of max/2 rows
// (decision 0116). Safe for concurrent use.
//
// A key whose remembered row another process changed is contended: it takes
// the locking path until that path found its row as this process left it
// in calmNeeded batches in a row. Keys not remembered take the
// one-round-trip path only while, of such keys met lately, no more had a
// row than had none (found, absent: decayed counts; found starts at 1).
type rowCache struct {
	mu       sync.Mutex
	max      int
	cur, old map[rowKey]cachedRow

	found, absent int64

	oneTrip, conflicts, locked atomic.Int64
}

// cachedRow is a rowCache entry: row is the state this process last
// committed or read when known; contended is set when a check found the row
// changed by someone else, calm counts the quiet locking batches since and
// strikes the contentions.
type cachedRow struct {
	row              bucketRow
	known, contended bool
	calm, strikes    int
}

// calmNeeded is the number of quiet locking batches after which a
// contended key takes the one-round-trip path again (2, doubling at each
// strike, up to 64).
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
// not remembered; lock tells the batch to take the locking path (see
// rowCache).
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

// remember stores the rows of a committed transaction that loaded rows
// (under lock, or remembered) and wrote ws: each written row as written,
// each other as loaded; a row with new ledger rows or deleted is
// forgotten, a contended key keeps its mark. Among keys (a locking read's,
// or the keys an optimistic write inserted) it counts the newcomers, keys
// not remembered that had a row (found: loaded) or none (absent), and the
// calm of contended keys.
func (c *rowCache) remember(loaded []bucketRow, ws *writeSet, keys []rowKey) {
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
	c.found += int64(found)
	c.absent += int64(absent)
	if c.found+c.absent >= newcomersDecayAt {
		c.found, c.absent = c.found/2, c.absent/2
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
			// Without ledger rows the head and its minute are unchanged.
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
	// Conflicts are one-round-trip writes that found a row changed and
	// rolled back (then ran on the locking path).
	Conflicts int64
	// Locked batches ran on the two-round-trip locking path.
	Locked int64
}

// OptimisticStats returns the counts of NonDurable's batches so far; zero
// on SQLite and before NonDurable is first called.
func (s *Store) OptimisticStats() OptimisticStats {
	c := s.fast.Load()
	if c == nil {
		return OptimisticStats{}
	}
	return OptimisticStats{OneTrip: c.oneTrip.Load(), Conflicts: c.conflicts.Load(), Locked: c.locked.Load()}
}

// updateOptimistic runs a non-durable batch of keys in one round trip on
// remembered rows (see rowCache), a key not remembered inserted as a full
// bucket. done is false when the batch must run on the locking path
// instead (apply failed, the batch writes anything else, or the check or
// an insert found a row changed or existing); otherwise err is the batch's
// outcome. The clock is read before the locks: the write commits only if
// nobody wrote the rows since this process did, at an earlier instant.
func (s *Store) updateOptimistic(ctx context.Context, p driverkit.Pipeliner, conn *sql.Conn, c *rowCache, keys []throttle.Key, apply func(*throttle.Tx) error) (done bool, err error) {
	byRow, rowKeys, _ := s.rowKeys(keys, nil)
	if len(rowKeys) == 0 {
		return false, nil
	}
	rows, unknown, lock := c.get(rowKeys)
	if lock {
		return false, nil
	}
	ws, err := s.decide(rows, nil, byRow, apply, func() (map[rowKey]int64, error) { return headMinutesOf(rows), nil })
	if err != nil {
		// A row this process cannot read back, or apply failed: the rows
		// may be stale, the locking path gives the answer.
		return false, nil
	}
	if len(ws.deletes)+len(ws.ledger)+len(ws.merges) > 0 || len(ws.inserts) != len(unknown) {
		// Every key not remembered must be inserted: its absence is
		// checked only by the insert's unique index.
		return false, nil
	}
	// checked: the remembered rows passed the check (its row came back).
	checked := len(rows) == 0
	load := []driverkit.Query{{SQL: optimisticSettingsSQL}}
	if len(rows) > 0 {
		load = append(load, driverkit.Query{SQL: optimisticCheckSQL, Args: append(bucketArrays(rows), int64(len(rows))),
			Scan: func(r driverkit.Rows) error {
				for r.Next() {
					checked = true
				}
				return nil
			}})
	}
	if !ws.empty() {
		load = append(load, driverkit.Query{SQL: optimisticWriteSQL, Args: append(bucketArrays(ws.updates), bucketArrays(ws.inserts)...)})
	}
	conflict := false
	err = p.Pipeline(ctx, conn, &driverkit.Pipeline{
		Load: load,
		Outcome: func(writeErr, commitErr, closeErr error) error {
			class := s.driver.Classify(writeErr)
			switch {
			case writeErr != nil && class&driverkit.ClassTimeout != 0:
				// The check waited out lock_timeout: nothing applied, and
				// the locking path would wait for the same lock.
				return writeErr
			case writeErr != nil && class&driverkit.ClassServer != 0:
				// Refused, nothing applied: a changed row (optimisticCheckSQL's
				// division by zero), an existing one (unique violation) or
				// anything else goes to the locking path.
				conflict = true
				return writeErr
			case writeErr != nil && class&driverkit.ClassTransient != 0:
				// Not sent: retried like any transient error.
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
			c.contend(column(rows, func(r *bucketRow) rowKey { return r.key }))
		}
		s.logger.Debug("optimistic write found a row changed or existing; locking", "error", err)
		return false, nil
	case err != nil:
		c.forget(rowKeys)
		return true, err
	}
	c.oneTrip.Add(1)
	c.remember(rows, ws, unknown)
	return true, nil
}

// optimisticSettingsSQL is asyncCommitSQL plus generic plans for the
// transaction's statements: custom plans were replanned at every execution,
// and planning cost 2 to 5 times the execution (decision 0116).
const optimisticSettingsSQL = `SELECT set_config('synchronous_commit', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)`

// optimisticCheckSQL locks, in key order (pgLoadSQL's, so the paths never
// deadlock), the rows of $1–$15 that still hold exactly that state, and
// divides by zero unless it locked $16 rows, failing the transaction. It
// is a statement of its own, not a CTE of the write, so the update's pages
// are not pinned and can be pruned (decision 0116).
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

// optimisticWriteSQL is writeSQL without the ledger: it updates the rows
// of $1–$15 (last_entry stays) and inserts those of $16–$30, failing with a
// unique violation on a row that exists.
var optimisticWriteSQL = `
	WITH u AS (
		UPDATE balde_buckets AS b
		SET ` + setState("x") + `
		FROM ` + bucketUnnest(1) + `
		WHERE b.policy_id = x.policy_id AND b.env = x.env AND b.identifier = x.identifier
	)
	INSERT INTO balde_buckets (` + bucketColumns + `)
	SELECT *
	FROM ` + bucketUnnest(16)
