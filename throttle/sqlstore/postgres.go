package sqlstore

import (
	"context"
	"database/sql"
	"strconv"
	"strings"

	"github.com/balde-throttle/balde/throttle/sqlstore/internal/driverkit"
)

// postgresWriter keeps a transaction to a fixed number of round trips
// whatever the number of decisions in it (two on a pgx pool, pipeline.go;
// four through plain database/sql): statements take arrays (unnest), the
// write is one statement of data-modifying CTEs, and buckets are locked
// with FOR UPDATE in key order.
type postgresWriter struct{}

func (postgresWriter) close() error { return nil }

// keyArrays splits keys into the three parallel arrays unnest takes.
func keyArrays(keys []rowKey) []any {
	return []any{column(keys, func(k *rowKey) int64 { return k.policyID }), column(keys, func(k *rowKey) string { return k.env }),
		column(keys, func(k *rowKey) string { return k.identifier })}
}

// pgLoadSQL locks and reads the bucket rows of three key arrays, in key
// order.
const pgLoadSQL = `
	SELECT ` + lockedBucketColumns + `
	FROM ` + lockedBucketsFrom + `
	WHERE (b.policy_id, b.env, b.identifier) IN (
		SELECT * FROM unnest($1::int[], $2::text[], $3::text[]))
	ORDER BY b.policy_id, b.env, b.identifier
	FOR UPDATE OF b`

// pgCreditsSQL returns the credit refs of four arrays already in the ledger.
const pgCreditsSQL = `
	SELECT policy_id, env, identifier, ref
	FROM balde_token_ledger
	WHERE reason = 4
	  AND (policy_id, env, identifier, ref) IN (
		SELECT * FROM unnest($1::int[], $2::text[], $3::text[], $4::text[]))`

func (postgresWriter) loadBuckets(ctx context.Context, tx *sql.Tx, keys []rowKey) ([]bucketRow, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	return queryAll(ctx, tx, pgLoadSQL, keyArrays(keys), scanLockedBucketRow)
}

// headMinutes reads the minutes loadBuckets joined (one round trip fewer
// than asking again).
func (postgresWriter) headMinutes(_ context.Context, _ *sql.Tx, rows []bucketRow) (map[rowKey]int64, error) {
	return headMinutesOf(rows), nil
}

// headMinutesOf returns the headMinute of rows that have one.
func headMinutesOf(rows []bucketRow) map[rowKey]int64 {
	out := make(map[rowKey]int64)
	for _, r := range rows {
		if r.headMinute.Valid {
			out[r.key] = r.headMinute.Int64
		}
	}
	return out
}

// creditArrays splits refs into the four arrays of pgCreditsSQL.
func creditArrays(refs []creditKey) []any {
	return []any{column(refs, func(c *creditKey) int64 { return c.policyID }), column(refs, func(c *creditKey) string { return c.env }),
		column(refs, func(c *creditKey) string { return c.identifier }), column(refs, func(c *creditKey) string { return c.ref })}
}

func (postgresWriter) loadCredits(ctx context.Context, tx *sql.Tx, refs []creditKey) ([]creditKey, error) {
	return queryAll(ctx, tx, pgCreditsSQL, creditArrays(refs), scanCredit)
}

func scanCredit(sc scanner) (c creditKey, err error) {
	err = sc.Scan(&c.policyID, &c.env, &c.identifier, &c.ref)
	return c, err
}

// collect appends to out the rows of rs, each read by scan.
func collect[T any](rs driverkit.Rows, out *[]T, scan func(scanner) (T, error)) error {
	for rs.Next() {
		v, err := scan(rs)
		if err != nil {
			return err
		}
		*out = append(*out, v)
	}
	return nil
}

// queryAll runs query on q and reads every row with scan.
func queryAll[T any](ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string, args []any, scan func(scanner) (T, error)) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	if err := collect(rows, &out, scan); err != nil {
		return nil, err
	}
	return out, rows.Err()
}

// bucketUnnest is the SQL of the rows x(bucketColumns) that PostgreSQL
// unnests from the arrays of bucketArrays, bound as the parameters from
// $first on (first, first+1, …, first+14).
func bucketUnnest(first int) string {
	types := [...]string{"int", "text", "text", "bigint", "bigint", "bigint", "bigint", "smallint",
		"bigint", "bigint", "bigint", "bytea", "bigint", "bigint", "int"}
	params := make([]string, len(types))
	for i, t := range types {
		params[i] = "$" + strconv.Itoa(first+i) + "::" + t + "[]"
	}
	return "unnest(" + strings.Join(params, ", ") + ") AS x(" + bucketColumns + ")"
}

// bucketArrays splits rows into the parallel arrays of the bucket columns.
func bucketArrays(rows []bucketRow) []any {
	return []any{
		column(rows, func(r *bucketRow) int64 { return r.key.policyID }),
		column(rows, func(r *bucketRow) string { return r.key.env }),
		column(rows, func(r *bucketRow) string { return r.key.identifier }),
		column(rows, func(r *bucketRow) int64 { return r.tokens }),
		column(rows, func(r *bucketRow) int64 { return r.carry }),
		column(rows, func(r *bucketRow) int64 { return r.refilledAt }),
		column(rows, func(r *bucketRow) int64 { return r.sendCount }),
		column(rows, func(r *bucketRow) int64 { return r.severity }),
		column(rows, func(r *bucketRow) *int64 { return nullable(r.lastSentAt) }),
		column(rows, func(r *bucketRow) *int64 { return nullable(r.lastEntry) }),
		column(rows, func(r *bucketRow) *int64 { return nullable(r.blockedUntil) }),
		column(rows, func(r *bucketRow) []byte { return r.spent }),
		column(rows, func(r *bucketRow) *int64 { return nullable(r.nextAt) }),
		column(rows, func(r *bucketRow) *int64 { return nullable(r.heldUntil) }),
		column(rows, func(r *bucketRow) int64 { return r.blockLevel }),
	}
}

// column is one field of every row, as an array parameter.
func column[R, T any](rows []R, field func(*R) T) []T {
	out := make([]T, len(rows))
	for i := range rows {
		out[i] = field(&rows[i])
	}
	return out
}

func nullable(n sql.NullInt64) *int64 {
	if !n.Valid {
		return nil
	}
	return &n.Int64
}

// writeSQL inserts the ledger rows with ids from the sequence, each linked
// to the previous row of its bucket, updates, inserts and deletes buckets,
// pointing each at its latest ledger row, and adds merged minute rows to
// their head rows. A new bucket another transaction inserted first fails
// with a unique violation and the transaction is re-run.
var writeSQL = `
	WITH v AS MATERIALIZED (
		SELECT t.*, nextval(pg_get_serial_sequence('balde_token_ledger', 'id')) AS id
		FROM unnest($1::int[], $2::text[], $3::text[], $4::bigint[], $5::smallint[], $6::bigint[],
		            $7::bigint[], $8::bigint[], $9::text[], $10::bigint[])
		     WITH ORDINALITY AS t(policy_id, env, identifier, at, reason, delta, balance, n, ref, head, ord)
	),
	c AS MATERIALIZED (
		SELECT v.*, COALESCE(lag(id) OVER (PARTITION BY policy_id, env, identifier ORDER BY ord), head) AS prev
		FROM v
	),
	l AS (
		INSERT INTO balde_token_ledger (id, policy_id, env, identifier, at, reason, delta, balance, n, prev, ref)
		SELECT id, policy_id, env, identifier, at, reason, delta, balance, n, prev, ref
		FROM c
	),
	h AS (
		SELECT DISTINCT ON (policy_id, env, identifier) policy_id, env, identifier, id AS last
		FROM c
		ORDER BY policy_id, env, identifier, ord DESC
	),
	u AS (
		UPDATE balde_buckets AS b
		SET ` + setState("x") + `, last_entry = COALESCE(h.last, x.last_entry)
		FROM ` + bucketUnnest(11) + `
		LEFT JOIN h ON h.policy_id = x.policy_id AND h.env = x.env AND h.identifier = x.identifier
		WHERE b.policy_id = x.policy_id AND b.env = x.env AND b.identifier = x.identifier
	),
	i AS (
		INSERT INTO balde_buckets (` + bucketColumns + `)
		SELECT x.policy_id, x.env, x.identifier, x.tokens, x.carry, x.refilled_at, x.send_count, x.severity,
		       x.last_sent_at, COALESCE(h.last, x.last_entry), x.blocked_until, x.spent, x.next_at, x.held_until, x.block_level
		FROM ` + bucketUnnest(26) + `
		LEFT JOIN h ON h.policy_id = x.policy_id AND h.env = x.env AND h.identifier = x.identifier
	),
	d AS (
		DELETE FROM balde_buckets
		WHERE (policy_id, env, identifier) IN (
			SELECT * FROM unnest($41::int[], $42::text[], $43::text[]))
	),
	m AS (
		UPDATE balde_token_ledger AS t
		SET delta = t.delta + x.delta,
		    n = t.n + x.n,
		    balance = x.balance
		FROM unnest($44::bigint[], $45::bigint[], $46::bigint[], $47::bigint[]) AS x(id, delta, n, balance)
		WHERE t.id = x.id
	)
	SELECT 1`

func (postgresWriter) write(ctx context.Context, tx *sql.Tx, ws *writeSet) error {
	if ws.empty() {
		return nil
	}
	_, err := tx.ExecContext(ctx, writeSQL, writeArgs(ws)...)
	return err
}

// empty tells whether ws writes nothing.
func (ws *writeSet) empty() bool {
	return len(ws.ledger) == 0 && len(ws.inserts) == 0 && len(ws.updates) == 0 && len(ws.deletes) == 0 && len(ws.merges) == 0
}

// writeArgs are the arguments of writeSQL for ws.
func writeArgs(ws *writeSet) []any {
	args := ledgerArrays(ws.ledger, ws.heads)
	args = append(args, bucketArrays(ws.updates)...)
	args = append(args, bucketArrays(ws.inserts)...)
	args = append(args, keyArrays(ws.deletes)...)
	return append(args,
		column(ws.merges, func(m *ledgerRow) int64 { return m.id }),
		column(ws.merges, func(m *ledgerRow) int64 { return m.delta }),
		column(ws.merges, func(m *ledgerRow) int64 { return m.n }),
		column(ws.merges, func(m *ledgerRow) int64 { return m.balance }))
}

// ledgerArrays splits ledger rows into the parallel arrays of writeSQL,
// with each row's bucket head before the transaction.
func ledgerArrays(rows []ledgerRow, heads map[rowKey]sql.NullInt64) []any {
	ref, head := make([]*string, len(rows)), make([]*int64, len(rows))
	for i, r := range rows {
		if r.ref.Valid {
			ref[i] = &r.ref.String
		}
		head[i] = nullable(heads[r.key])
	}
	return []any{
		column(rows, func(r *ledgerRow) int64 { return r.key.policyID }),
		column(rows, func(r *ledgerRow) string { return r.key.env }),
		column(rows, func(r *ledgerRow) string { return r.key.identifier }),
		column(rows, func(r *ledgerRow) int64 { return r.at }),
		column(rows, func(r *ledgerRow) int64 { return r.reason }),
		column(rows, func(r *ledgerRow) int64 { return r.delta }),
		column(rows, func(r *ledgerRow) int64 { return r.balance }),
		column(rows, func(r *ledgerRow) int64 { return r.n }),
		ref, head,
	}
}
