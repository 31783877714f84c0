package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// sqliteWriter writes through prepared statements (on SQLite a statement
// is a function call, not a round trip), one statement per batch of rows
// (up to maxRowsPerStatement), on the store's only write connection, under
// the database write lock.
type sqliteWriter struct {
	credit, del, maxID, add *sql.Stmt
	// One decision on an existing bucket: an UPDATE by primary key and a
	// ledger INSERT that lets SQLite number the row.
	update1, ledger1, headMinute *sql.Stmt

	// By number of keys or rows; read-only after newSQLiteWriter.
	loads, upsert, updates, ledger sizedStmts

	all []*sql.Stmt // for close
}

// sizedStmts holds a statement for each number of rows, 1 to
// maxRowsPerStatement.
type sizedStmts [maxRowsPerStatement + 1]*sql.Stmt

// maxRowsPerStatement bounds the rows of one multi-row statement. Every
// size is prepared at open: inside a transaction it would need a second
// connection.
const maxRowsPerStatement = 32

func newSQLiteWriter(ctx context.Context, db *sql.DB) (*sqliteWriter, error) {
	w := &sqliteWriter{}
	type stmt struct {
		dst  **sql.Stmt
		text string
	}
	stmts := []stmt{
		{&w.credit, `
			SELECT EXISTS (
				SELECT 1
				FROM balde_token_ledger
				WHERE policy_id = ? AND env = ? AND identifier = ? AND reason = 4 AND ref = ?)`},
		{&w.del, `
			DELETE FROM balde_buckets
			WHERE policy_id = ? AND env = ? AND identifier = ?`},
		// The writer holds the database's write lock: the largest id cannot
		// change under it.
		{&w.maxID, `SELECT COALESCE(MAX(id), 0) FROM balde_token_ledger`},
		{&w.update1, `
			UPDATE balde_buckets
			SET tokens = ?, carry = ?, refilled_at = ?, send_count = ?, severity = ?,
			    last_sent_at = ?, last_entry = ?, blocked_until = ?, spent = ?, next_at = ?, held_until = ?, block_level = ?
			WHERE policy_id = ? AND env = ? AND identifier = ?`},
		{&w.ledger1, `
			INSERT INTO balde_token_ledger (policy_id, env, identifier, at, reason, delta, balance, n, prev, ref)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		// NULL unless the row aggregates takes.
		{&w.headMinute, `
			SELECT MAX(at) FROM balde_token_ledger WHERE id = ? AND reason = ` + reasonMinuteOfTakesSQL},
		{&w.add, `
			UPDATE balde_token_ledger
			SET delta = delta + ?,
			    n = n + ?,
			    balance = ?
			WHERE id = ?`},
	}
	for n := 1; n <= maxRowsPerStatement; n++ {
		stmts = append(stmts, stmt{&w.loads[n], loadSQL(n)}, stmt{&w.upsert[n], upsertSQL(n)},
			stmt{&w.updates[n], updateSQL(n)}, stmt{&w.ledger[n], ledgerSQL(n)})
	}
	for _, s := range stmts {
		st, err := db.PrepareContext(ctx, s.text)
		if err != nil {
			w.close()
			return nil, fmt.Errorf("prepare: %w", err)
		}
		*s.dst = st
		w.all = append(w.all, st)
	}
	return w, nil
}

// tuples returns n comma-separated groups of k placeholders.
func tuples(n, k int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", k), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(one+", ", n), ", ")
}

// loadSQL reads the state columns of n bucket rows by primary key, after,
// for several keys, the number of the key in the list (CROSS JOIN keeps
// the list as the outer loop: one seek per key, in order).
func loadSQL(n int) string {
	if n == 1 {
		return `SELECT ` + sqliteStateColumns + ` FROM balde_buckets WHERE policy_id = ? AND env = ? AND identifier = ?`
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "(?, ?, ?, " + strconv.Itoa(i) + ")"
	}
	return `
		SELECT v.column4 AS a, ` + sqliteStateColumns + `
		FROM (VALUES ` + strings.Join(keys, ", ") + `) AS v
		CROSS JOIN balde_buckets
		ON policy_id = v.column1 AND env = v.column2 AND identifier = v.column3`
}

// upsertSQL writes rows that exist or are new (nobody else can insert
// under the write lock).
func upsertSQL(n int) string {
	return `
		INSERT INTO balde_buckets (` + bucketColumns + `)
		VALUES ` + tuples(n, 15) + `
		ON CONFLICT (policy_id, env, identifier) DO UPDATE
		SET ` + setState("excluded") + `, last_entry = excluded.last_entry`
}

// updateSQL writes n rows that exist by primary key (an upsert would try
// the insert first).
func updateSQL(n int) string {
	return `
		UPDATE balde_buckets AS b
		SET tokens = v.column4, carry = v.column5, refilled_at = v.column6, send_count = v.column7,
		    severity = v.column8, last_sent_at = v.column9, last_entry = v.column10,
		    blocked_until = v.column11, spent = v.column12, next_at = v.column13, held_until = v.column14, block_level = v.column15
		FROM (VALUES ` + tuples(n, 15) + `) AS v
		WHERE b.policy_id = v.column1 AND b.env = v.column2 AND b.identifier = v.column3`
}

func ledgerSQL(n int) string {
	return `
		INSERT INTO balde_token_ledger (` + ledgerColumns + `)
		VALUES ` + tuples(n, 11)
}

func (w *sqliteWriter) close() error {
	var errs []error
	for _, st := range w.all {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}

// chunks calls fn on consecutive pieces of n items, maxRowsPerStatement at most.
func chunks(n int, fn func(lo, hi int) error) error {
	for lo := 0; lo < n; lo += maxRowsPerStatement {
		if err := fn(lo, min(lo+maxRowsPerStatement, n)); err != nil {
			return err
		}
	}
	return nil
}

func (w *sqliteWriter) loadBuckets(ctx context.Context, tx *sql.Tx, keys []rowKey) ([]bucketRow, error) {
	if len(keys) == 1 {
		return w.loadBucket(ctx, tx, keys[0])
	}
	out := make([]bucketRow, 0, len(keys))
	err := chunks(len(keys), func(lo, hi int) error {
		if hi == lo+1 {
			// A last chunk of one key: loads[1] is loadBucket's (no key number).
			rows, err := w.loadBucket(ctx, tx, keys[lo])
			out = append(out, rows...)
			return err
		}
		args := make([]any, 0, 3*(hi-lo))
		for _, k := range keys[lo:hi] {
			args = append(args, k.policyID, k.env, k.identifier)
		}
		rows, err := tx.StmtContext(ctx, w.loads[hi-lo]).QueryContext(ctx, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		if err := collect(rows, &out, func(sc scanner) (bucketRow, error) { return scanNumberedBucketState(sc, keys[lo:hi]) }); err != nil {
			return err
		}
		return rows.Err()
	})
	return out, err
}

// loadBucket is loadBuckets of one key: its state columns by primary key.
func (w *sqliteWriter) loadBucket(ctx context.Context, tx *sql.Tx, k rowKey) ([]bucketRow, error) {
	r, err := scanBucketState(tx.StmtContext(ctx, w.loads[1]).QueryRowContext(ctx, k.policyID, k.env, k.identifier), k)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return []bucketRow{r}, nil
}

func (w *sqliteWriter) headMinutes(ctx context.Context, tx *sql.Tx, rows []bucketRow) (map[rowKey]int64, error) {
	out := make(map[rowKey]int64)
	st := tx.StmtContext(ctx, w.headMinute)
	for _, r := range rows {
		if !r.lastEntry.Valid {
			continue
		}
		var at sql.NullInt64
		if err := st.QueryRowContext(ctx, r.lastEntry.Int64).Scan(&at); err != nil {
			return nil, err
		}
		if at.Valid {
			out[r.key] = at.Int64
		}
	}
	return out, nil
}

func (w *sqliteWriter) loadCredits(ctx context.Context, tx *sql.Tx, refs []creditKey) ([]creditKey, error) {
	st := tx.StmtContext(ctx, w.credit)
	var found []creditKey
	for _, c := range refs {
		var exists bool
		if err := st.QueryRowContext(ctx, c.policyID, c.env, c.identifier, c.ref).Scan(&exists); err != nil {
			return nil, err
		}
		if exists {
			found = append(found, c)
		}
	}
	return found, nil
}

// updateBuckets writes rows that exist: one by the UPDATE of its primary
// key, several in one UPDATE ... FROM (VALUES ...) per chunk.
func (w *sqliteWriter) updateBuckets(ctx context.Context, tx *sql.Tx, rows []bucketRow) error {
	if len(rows) == 1 {
		r := rows[0]
		_, err := tx.StmtContext(ctx, w.update1).ExecContext(ctx, r.tokens, r.carry, r.refilledAt, r.sendCount, r.severity,
			nullInt(r.lastSentAt), nullInt(r.lastEntry), nullInt(r.blockedUntil), r.spent, nullInt(r.nextAt), nullInt(r.heldUntil),
			r.blockLevel, r.key.policyID, r.key.env, r.key.identifier)
		return err
	}
	return execChunks(ctx, tx, &w.updates, len(rows), func(lo, hi int) []any { return bucketArgs(rows[lo:hi]) })
}

// execChunks runs the statements of stmts on consecutive chunks of n rows
// (chunks), args giving each chunk's arguments.
func execChunks(ctx context.Context, tx *sql.Tx, stmts *sizedStmts, n int, args func(lo, hi int) []any) error {
	return chunks(n, func(lo, hi int) error {
		_, err := tx.StmtContext(ctx, stmts[hi-lo]).ExecContext(ctx, args(lo, hi)...)
		return err
	})
}

// bucketArgs lists the columns of rows in bucketColumns order.
func bucketArgs(rows []bucketRow) []any {
	args := make([]any, 0, 15*len(rows))
	for _, r := range rows {
		args = append(args, r.key.policyID, r.key.env, r.key.identifier, r.tokens, r.carry, r.refilledAt,
			r.sendCount, r.severity, nullInt(r.lastSentAt), nullInt(r.lastEntry), nullInt(r.blockedUntil), r.spent,
			nullInt(r.nextAt), nullInt(r.heldUntil), r.blockLevel)
	}
	return args
}

// write numbers the ledger rows after the largest id (the write lock is
// held: nobody else can insert), links them, then runs the statements.
func (w *sqliteWriter) write(ctx context.Context, tx *sql.Tx, ws *writeSet) error {
	if len(ws.ledger) == 1 {
		// SQLite numbers the row after the largest id, as below.
		r := ws.ledger[0]
		res, err := tx.StmtContext(ctx, w.ledger1).ExecContext(ctx, r.key.policyID, r.key.env, r.key.identifier, r.at, r.reason,
			r.delta, r.balance, r.n, nullInt(ws.heads[r.key]), nullString(r.ref))
		if err != nil {
			return fmt.Errorf("insert ledger: %w", err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("insert ledger: %w", err)
		}
		ws.link([]int64{id})
	} else if len(ws.ledger) > 0 {
		var last int64
		if err := tx.StmtContext(ctx, w.maxID).QueryRowContext(ctx).Scan(&last); err != nil {
			return err
		}
		ids := make([]int64, len(ws.ledger))
		for i := range ids {
			ids[i] = last + 1 + int64(i)
		}
		ws.link(ids)
		if err := w.insertLedger(ctx, tx, ws.ledger); err != nil {
			return fmt.Errorf("insert ledger: %w", err)
		}
	} else {
		ws.link(nil)
	}
	add := tx.StmtContext(ctx, w.add)
	for _, m := range ws.merges {
		if _, err := add.ExecContext(ctx, m.delta, m.n, m.balance, m.id); err != nil {
			return fmt.Errorf("add to ledger row: %w", err)
		}
	}
	if err := w.updateBuckets(ctx, tx, ws.updates); err != nil {
		return fmt.Errorf("write buckets: %w", err)
	}
	if err := execChunks(ctx, tx, &w.upsert, len(ws.inserts), func(lo, hi int) []any { return bucketArgs(ws.inserts[lo:hi]) }); err != nil {
		return fmt.Errorf("write buckets: %w", err)
	}
	for _, k := range ws.deletes {
		if _, err := tx.StmtContext(ctx, w.del).ExecContext(ctx, k.policyID, k.env, k.identifier); err != nil {
			return err
		}
	}
	return nil
}

// insertLedger inserts rows, numbered and linked.
func (w *sqliteWriter) insertLedger(ctx context.Context, tx *sql.Tx, rows []ledgerRow) error {
	return execChunks(ctx, tx, &w.ledger, len(rows), func(lo, hi int) []any {
		args := make([]any, 0, 11*(hi-lo))
		for _, r := range rows[lo:hi] {
			args = append(args, r.id, r.key.policyID, r.key.env, r.key.identifier, r.at, r.reason,
				r.delta, r.balance, r.n, nullInt(r.prev), nullString(r.ref))
		}
		return args
	})
}
