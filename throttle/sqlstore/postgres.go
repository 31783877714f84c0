package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"slices"
)

// postgresWriter sends each kind of write as one statement over arrays
// (unnest), whatever the number of rows: on PostgreSQL every statement is a
// round trip, so a transaction costs the same few of them for one decision
// or a hundred. Buckets are locked with FOR UPDATE in key order.
type postgresWriter struct{}

func (postgresWriter) close() error { return nil }

// keyArrays splits keys into the three parallel arrays unnest takes.
func keyArrays(keys []rowKey) (ids []int64, envs, identifiers []string) {
	ids = make([]int64, len(keys))
	envs = make([]string, len(keys))
	identifiers = make([]string, len(keys))
	for i, k := range keys {
		ids[i], envs[i], identifiers[i] = k.policyID, k.env, k.identifier
	}
	return ids, envs, identifiers
}

func (postgresWriter) loadBuckets(ctx context.Context, tx *sql.Tx, keys []rowKey) ([]bucketRow, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	ids, envs, identifiers := keyArrays(keys)
	rows, err := tx.QueryContext(ctx, `
		SELECT `+bucketColumns+`
		FROM buckets
		WHERE (policy_id, env, identifier) IN (
			SELECT * FROM unnest($1::int[], $2::text[], $3::text[]))
		ORDER BY policy_id, env, identifier
		FOR UPDATE`, ids, envs, identifiers)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []bucketRow
	for rows.Next() {
		r, err := scanBucketRow(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (postgresWriter) loadCredits(ctx context.Context, tx *sql.Tx, refs []creditKey) ([]creditKey, error) {
	keys := make([]rowKey, len(refs))
	texts := make([]string, len(refs))
	for i, c := range refs {
		keys[i], texts[i] = c.rowKey, c.ref
	}
	ids, envs, identifiers := keyArrays(keys)
	rows, err := tx.QueryContext(ctx, `
		SELECT policy_id, env, identifier, ref
		FROM token_ledger
		WHERE reason = 4
		  AND (policy_id, env, identifier, ref) IN (
			SELECT * FROM unnest($1::int[], $2::text[], $3::text[], $4::text[]))`,
		ids, envs, identifiers, texts)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var found []creditKey
	for rows.Next() {
		var c creditKey
		if err := rows.Scan(&c.policyID, &c.env, &c.identifier, &c.ref); err != nil {
			return nil, err
		}
		found = append(found, c)
	}
	return found, rows.Err()
}

// bucketArrays splits rows into the parallel arrays of the bucket columns.
func bucketArrays(rows []bucketRow) []any {
	keys := make([]rowKey, len(rows))
	tokens := make([]int64, len(rows))
	carry := make([]int64, len(rows))
	refilled := make([]int64, len(rows))
	sends := make([]int64, len(rows))
	severity := make([]int64, len(rows))
	lastSent := make([]*int64, len(rows))
	lastEntry := make([]*int64, len(rows))
	blocked := make([]*int64, len(rows))
	spent := make([][]byte, len(rows))
	for i, r := range rows {
		keys[i] = r.key
		tokens[i], carry[i], refilled[i], sends[i], severity[i] = r.tokens, r.carry, r.refilledAt, r.sendCount, r.severity
		lastSent[i], lastEntry[i], blocked[i], spent[i] = nullable(r.lastSentAt), nullable(r.lastEntry), nullable(r.blockedUntil), r.spent
	}
	ids, envs, identifiers := keyArrays(keys)
	return []any{ids, envs, identifiers, tokens, carry, refilled, sends, severity, lastSent, lastEntry, blocked, spent}
}

func nullable(n sql.NullInt64) *int64 {
	if !n.Valid {
		return nil
	}
	return &n.Int64
}

const unnestBuckets = `
	SELECT * FROM unnest($1::int[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[],
	                     $7::bigint[], $8::smallint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bytea[])`

// insertBuckets creates new rows. Two transactions that both found no row
// for a key both insert it: the second fails with a unique violation and
// Update runs it again, now finding (and locking) the row.
func (postgresWriter) insertBuckets(ctx context.Context, tx *sql.Tx, rows []bucketRow) error {
	if len(rows) == 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO buckets (`+bucketColumns+`)`+unnestBuckets, bucketArrays(rows)...)
	return err
}

// updateBuckets writes rows this transaction holds locked.
func (postgresWriter) updateBuckets(ctx context.Context, tx *sql.Tx, rows []bucketRow) error {
	if len(rows) == 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, `
		UPDATE buckets AS b
		SET tokens = v.tokens,
		    carry = v.carry,
		    refilled_at = v.refilled_at,
		    send_count = v.send_count,
		    severity = v.severity,
		    last_sent_at = v.last_sent_at,
		    last_entry = v.last_entry,
		    blocked_until = v.blocked_until,
		    spent = v.spent
		FROM (`+unnestBuckets+`) AS v (`+bucketColumns+`)
		WHERE b.policy_id = v.policy_id AND b.env = v.env AND b.identifier = v.identifier`,
		bucketArrays(rows)...)
	return err
}

func (postgresWriter) deleteBuckets(ctx context.Context, tx *sql.Tx, keys []rowKey) error {
	if len(keys) == 0 {
		return nil
	}
	ids, envs, identifiers := keyArrays(keys)
	_, err := tx.ExecContext(ctx, `
		DELETE FROM buckets
		WHERE (policy_id, env, identifier) IN (
			SELECT * FROM unnest($1::int[], $2::text[], $3::text[]))`, ids, envs, identifiers)
	return err
}

func ledgerArrays(rows []ledgerRow) []any {
	keys := make([]rowKey, len(rows))
	id := make([]int64, len(rows))
	at := make([]int64, len(rows))
	reason := make([]int64, len(rows))
	delta := make([]int64, len(rows))
	balance := make([]int64, len(rows))
	n := make([]int64, len(rows))
	prev := make([]*int64, len(rows))
	ref := make([]*string, len(rows))
	for i, r := range rows {
		keys[i] = r.key
		id[i], at[i], reason[i], delta[i], balance[i], n[i] = r.id, r.at, r.reason, r.delta, r.balance, r.n
		prev[i] = nullable(r.prev)
		if r.ref.Valid {
			ref[i] = &r.ref.String
		}
	}
	ids, envs, identifiers := keyArrays(keys)
	return []any{id, ids, envs, identifiers, at, reason, delta, balance, n, prev, ref}
}

func (postgresWriter) insertLedger(ctx context.Context, tx *sql.Tx, rows []ledgerRow) error {
	if len(rows) == 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, `
		INSERT INTO token_ledger (`+ledgerColumns+`)
		SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[], $4::text[], $5::bigint[], $6::smallint[],
		                     $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::text[])`, ledgerArrays(rows)...)
	return err
}

// ledgerIDs draws n ids from the identity's sequence in one round trip.
// Ids of concurrent transactions interleave, but a bucket's rows are
// written under its row lock, so along one bucket they increase.
func (postgresWriter) ledgerIDs(ctx context.Context, tx *sql.Tx, n int) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, `
		SELECT nextval(pg_get_serial_sequence('token_ledger', 'id'))
		FROM generate_series(1, $1)`, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ids := make([]int64, 0, n)
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, rows.Err()
}

func (postgresWriter) minuteRow(ctx context.Context, tx *sql.Tx, id, at int64) (bool, error) {
	var same bool
	err := tx.QueryRowContext(ctx, `SELECT reason = 10 AND at = $1 FROM token_ledger WHERE id = $2`, at, id).Scan(&same)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return same, err
}

func (postgresWriter) addToLedgerRow(ctx context.Context, tx *sql.Tx, id int64, r ledgerRow) error {
	_, err := tx.ExecContext(ctx, `
		UPDATE token_ledger
		SET delta = delta + $1,
		    n = n + $2,
		    balance = $3
		WHERE id = $4`, r.delta, r.n, r.balance, id)
	return err
}
