package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// sqliteWriter writes through prepared single-row statements: on SQLite a
// statement is a function call, not a round trip, and a prepared one skips
// parsing. All of them run on the store's only write connection.
type sqliteWriter struct {
	load, credit, insert, update, del, ledger, maxID, minute, add *sql.Stmt
}

func newSQLiteWriter(ctx context.Context, db *sql.DB) (*sqliteWriter, error) {
	w := &sqliteWriter{}
	stmts := []struct {
		dst  **sql.Stmt
		text string
	}{
		{&w.load, `
			SELECT ` + bucketColumns + `
			FROM buckets
			WHERE policy_id = ? AND env = ? AND identifier = ?`},
		{&w.credit, `
			SELECT 1
			FROM token_ledger
			WHERE policy_id = ? AND env = ? AND identifier = ? AND reason = 4 AND ref = ?`},
		{&w.insert, `
			INSERT INTO buckets (` + bucketColumns + `)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&w.update, `
			UPDATE buckets
			SET tokens = ?,
			    carry = ?,
			    refilled_at = ?,
			    send_count = ?,
			    severity = ?,
			    last_sent_at = ?,
			    last_entry = ?,
			    blocked_until = ?,
			    spent = ?
			WHERE policy_id = ? AND env = ? AND identifier = ?`},
		{&w.del, `
			DELETE FROM buckets
			WHERE policy_id = ? AND env = ? AND identifier = ?`},
		{&w.ledger, `
			INSERT INTO token_ledger (` + ledgerColumns + `)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		// The writer holds the database's write lock: the largest id cannot
		// change under it.
		{&w.maxID, `SELECT COALESCE(MAX(id), 0) FROM token_ledger`},
		{&w.minute, `SELECT reason = 10 AND at = ? FROM token_ledger WHERE id = ?`},
		{&w.add, `
			UPDATE token_ledger
			SET delta = delta + ?,
			    n = n + ?,
			    balance = ?
			WHERE id = ?`},
	}
	for _, s := range stmts {
		st, err := db.PrepareContext(ctx, s.text)
		if err != nil {
			w.close()
			return nil, fmt.Errorf("prepare: %w", err)
		}
		*s.dst = st
	}
	return w, nil
}

func (w *sqliteWriter) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{w.load, w.credit, w.insert, w.update, w.del, w.ledger, w.maxID, w.minute, w.add} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

func (w *sqliteWriter) loadBuckets(ctx context.Context, tx *sql.Tx, keys []rowKey) ([]bucketRow, error) {
	st := tx.StmtContext(ctx, w.load)
	out := make([]bucketRow, 0, len(keys))
	for _, k := range keys {
		r, err := scanBucketRow(st.QueryRowContext(ctx, k.policyID, k.env, k.identifier))
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (w *sqliteWriter) loadCredits(ctx context.Context, tx *sql.Tx, refs []creditKey) ([]creditKey, error) {
	st := tx.StmtContext(ctx, w.credit)
	var found []creditKey
	for _, c := range refs {
		var one int
		err := st.QueryRowContext(ctx, c.policyID, c.env, c.identifier, c.ref).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		found = append(found, c)
	}
	return found, nil
}

func (w *sqliteWriter) insertBuckets(ctx context.Context, tx *sql.Tx, rows []bucketRow) error {
	if len(rows) == 0 {
		return nil
	}
	st := tx.StmtContext(ctx, w.insert)
	for _, r := range rows {
		if _, err := st.ExecContext(ctx, r.key.policyID, r.key.env, r.key.identifier, r.tokens, r.carry, r.refilledAt,
			r.sendCount, r.severity, r.lastSentAt, r.lastEntry, r.blockedUntil, r.spent); err != nil {
			return err
		}
	}
	return nil
}

func (w *sqliteWriter) updateBuckets(ctx context.Context, tx *sql.Tx, rows []bucketRow) error {
	if len(rows) == 0 {
		return nil
	}
	st := tx.StmtContext(ctx, w.update)
	for _, r := range rows {
		if _, err := st.ExecContext(ctx, r.tokens, r.carry, r.refilledAt, r.sendCount, r.severity,
			r.lastSentAt, r.lastEntry, r.blockedUntil, r.spent, r.key.policyID, r.key.env, r.key.identifier); err != nil {
			return err
		}
	}
	return nil
}

func (w *sqliteWriter) deleteBuckets(ctx context.Context, tx *sql.Tx, keys []rowKey) error {
	if len(keys) == 0 {
		return nil
	}
	st := tx.StmtContext(ctx, w.del)
	for _, k := range keys {
		if _, err := st.ExecContext(ctx, k.policyID, k.env, k.identifier); err != nil {
			return err
		}
	}
	return nil
}

func (w *sqliteWriter) ledgerIDs(ctx context.Context, tx *sql.Tx, n int) ([]int64, error) {
	var last int64
	if err := tx.StmtContext(ctx, w.maxID).QueryRowContext(ctx).Scan(&last); err != nil {
		return nil, err
	}
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = last + 1 + int64(i)
	}
	return ids, nil
}

func (w *sqliteWriter) minuteRow(ctx context.Context, tx *sql.Tx, id, at int64) (bool, error) {
	var same bool
	err := tx.StmtContext(ctx, w.minute).QueryRowContext(ctx, at, id).Scan(&same)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return same, err
}

func (w *sqliteWriter) addToLedgerRow(ctx context.Context, tx *sql.Tx, id int64, r ledgerRow) error {
	_, err := tx.StmtContext(ctx, w.add).ExecContext(ctx, r.delta, r.n, r.balance, id)
	return err
}

func (w *sqliteWriter) insertLedger(ctx context.Context, tx *sql.Tx, rows []ledgerRow) error {
	if len(rows) == 0 {
		return nil
	}
	st := tx.StmtContext(ctx, w.ledger)
	for _, r := range rows {
		if _, err := st.ExecContext(ctx, r.id, r.key.policyID, r.key.env, r.key.identifier, r.at, r.reason,
			r.delta, r.balance, r.n, r.prev, r.ref); err != nil {
			return err
		}
	}
	return nil
}
