package sqlstore

import (
	"database/sql"
	"fmt"
	"strings"

	"github.com/balde-throttle/balde/internal/sqltime"
	"github.com/balde-throttle/balde/throttle"
)

// bucketRow is a row of the buckets table; times are stored as
// internal/sqltime says.
type bucketRow struct {
	key          rowKey
	tokens       int64
	carry        int64
	refilledAt   int64
	sendCount    int64
	severity     int64
	lastSentAt   sql.NullInt64
	lastEntry    sql.NullInt64 // id of the bucket's latest ledger row
	blockedUntil sql.NullInt64
	spent        []byte
	nextAt       sql.NullInt64
	heldUntil    sql.NullInt64
	blockLevel   int64

	// headMinute is, for a row loaded to be written, the minute of the
	// bucket's latest ledger row when that row aggregates a minute of takes
	// (reason 10): the next aggregated take row of that minute is added to it.
	headMinute sql.NullInt64
}

// bucketColumns lists the columns of bucketRow in scan order.
const bucketColumns = `policy_id, env, identifier, tokens, carry, refilled_at, send_count, severity, last_sent_at, last_entry, blocked_until, spent, next_at, held_until, block_level`

// setState is the SET list of a bucket's state columns but last_entry,
// each from the row from ("x", "excluded").
func setState(from string) string {
	var sets []string
	for _, c := range strings.Split(bucketColumns, ", ")[3:] {
		if c != "last_entry" {
			sets = append(sets, c+" = "+from+"."+c)
		}
	}
	return strings.Join(sets, ", ")
}

// sqliteStateColumns are bucketColumns without the key, in scan order, as
// one-letter aliases of expressions (unary plus is a no-op):
// modernc.org/sqlite allocates for a table column's name and declared type
// on every query, but not for these (decision 0118).
const sqliteStateColumns = `+tokens AS d, +carry AS e, +refilled_at AS f, +send_count AS g, +severity AS h, +last_sent_at AS i,
	+last_entry AS j, +blocked_until AS k, +spent AS l, +next_at AS m, +held_until AS n, +block_level AS o`

// lockedBucketColumns are bucketColumns of buckets AS b, plus the minute of
// the bucket's latest ledger row when it aggregates takes, joined as h on
// b.last_entry: what a write transaction loads.
const lockedBucketColumns = `b.policy_id, b.env, b.identifier, b.tokens, b.carry, b.refilled_at, b.send_count, b.severity,
	b.last_sent_at, b.last_entry, b.blocked_until, b.spent, b.next_at, b.held_until, b.block_level, CASE WHEN h.reason = 10 THEN h.at END`

// lockedBucketsFrom is the FROM clause of lockedBucketColumns.
const lockedBucketsFrom = `balde_buckets AS b LEFT JOIN balde_token_ledger AS h ON h.id = b.last_entry`

type scanner interface{ Scan(dest ...any) error }

// dest returns prefix followed by pointers to r's state columns, in
// sqliteStateColumns order, with room for one more.
func (r *bucketRow) dest(prefix ...any) []any {
	return append(append(make([]any, 0, len(prefix)+13), prefix...), &r.tokens, &r.carry, &r.refilledAt,
		&r.sendCount, &r.severity, &r.lastSentAt, &r.lastEntry, &r.blockedUntil, &r.spent, &r.nextAt, &r.heldUntil, &r.blockLevel)
}

// scanBucketRow scans bucketColumns.
func scanBucketRow(sc scanner) (r bucketRow, err error) {
	err = sc.Scan(r.dest(&r.key.policyID, &r.key.env, &r.key.identifier)...)
	return r, err
}

// scanLockedBucketRow scans lockedBucketColumns.
func scanLockedBucketRow(sc scanner) (r bucketRow, err error) {
	err = sc.Scan(append(r.dest(&r.key.policyID, &r.key.env, &r.key.identifier), &r.headMinute)...)
	return r, err
}

// scanBucketState scans sqliteStateColumns of key's row.
func scanBucketState(sc scanner, key rowKey) (r bucketRow, err error) {
	r.key = key
	err = sc.Scan(r.dest()...)
	return r, err
}

// scanNumberedBucketState scans the number of a key in keys followed by
// sqliteStateColumns (SQLite's load of several keys).
func scanNumberedBucketState(sc scanner, keys []rowKey) (r bucketRow, err error) {
	var i int64
	if err := sc.Scan(r.dest(&i)...); err != nil {
		return r, err
	}
	if i < 0 || i >= int64(len(keys)) {
		return r, fmt.Errorf("load: key number %d of %d", i, len(keys))
	}
	r.key = keys[i]
	return r, nil
}

// nullInt is n as the driver takes it (nil or int64): passing the value
// rather than the sql.NullInt64 spares database/sql its driver.Valuer
// conversion of each argument.
func nullInt(n sql.NullInt64) any {
	if !n.Valid {
		return nil
	}
	return n.Int64
}

// nullString is nullInt for sql.NullString.
func nullString(n sql.NullString) any {
	if !n.Valid {
		return nil
	}
	return n.String
}

func (r bucketRow) bucket(key throttle.Key) (throttle.Bucket, error) {
	spent, err := decodeSpent(r.spent)
	if err != nil {
		return throttle.Bucket{}, err
	}
	return throttle.Bucket{
		Key:          key,
		Tokens:       r.tokens,
		Carry:        r.carry,
		RefilledAt:   sqltime.Time(r.refilledAt),
		Spent:        spent,
		LastSentAt:   sqltime.NullTime(r.lastSentAt),
		SendCount:    r.sendCount,
		BlockedUntil: sqltime.NullTime(r.blockedUntil),
		NextAt:       sqltime.NullTime(r.nextAt),
		HeldUntil:    sqltime.NullTime(r.heldUntil),
		BlockLevel:   r.blockLevel,
		Severity:     throttle.Severity(r.severity),
	}, nil
}

func (s *Store) toBucketRow(b throttle.Bucket) bucketRow {
	return bucketRow{
		key:          s.rowKey(b.Key),
		tokens:       b.Tokens,
		carry:        b.Carry,
		refilledAt:   sqltime.Nanos(b.RefilledAt),
		sendCount:    b.SendCount,
		severity:     int64(b.Severity),
		lastSentAt:   sqltime.NullNanos(b.LastSentAt),
		blockedUntil: sqltime.NullNanos(b.BlockedUntil),
		spent:        encodeSpent(b.Spent),
		nextAt:       sqltime.NullNanos(b.NextAt),
		heldUntil:    sqltime.NullNanos(b.HeldUntil),
		blockLevel:   b.BlockLevel,
	}
}

// ledgerRow is a row of the token_ledger table.
type ledgerRow struct {
	id      int64
	key     rowKey
	at      int64
	reason  int64
	delta   int64
	balance int64
	n       int64
	prev    sql.NullInt64 // the previous row of the same bucket
	ref     sql.NullString
}

// reasonMinuteOfTakes is the stored reason of an aggregated take row; it
// reads back as throttle.LedgerTake with Count events.
const reasonMinuteOfTakes = 10

// reasonMinuteOfTakesSQL is reasonMinuteOfTakes in SQL text.
const reasonMinuteOfTakesSQL = "10"

const ledgerColumns = `id, policy_id, env, identifier, at, reason, delta, balance, n, prev, ref`

func scanLedgerRow(sc scanner) (ledgerRow, error) {
	var r ledgerRow
	err := sc.Scan(&r.id, &r.key.policyID, &r.key.env, &r.key.identifier, &r.at, &r.reason, &r.delta, &r.balance, &r.n, &r.prev, &r.ref)
	return r, err
}

func (s *Store) toLedgerRows(es []throttle.LedgerEntry, aggregated bool) []ledgerRow {
	if len(es) == 0 {
		return nil
	}
	out := make([]ledgerRow, len(es))
	for i, e := range es {
		reason := int64(e.Reason)
		if aggregated {
			reason = reasonMinuteOfTakes
		}
		out[i] = ledgerRow{
			key: s.rowKey(e.Key), at: sqltime.Nanos(e.At), reason: reason,
			delta: e.Delta, balance: e.Balance, n: max(e.Count, 1),
			ref: sql.NullString{String: e.Ref, Valid: e.Ref != ""},
		}
	}
	return out
}

func (r ledgerRow) entry(key throttle.Key) throttle.LedgerEntry {
	return throttle.LedgerEntry{
		ID: r.id, Key: key, At: sqltime.Time(r.at), Delta: r.delta, Balance: r.balance,
		Reason: readReason(r.reason), Ref: r.ref.String, Count: r.n,
	}
}

// readReason is the LedgerReason of a stored reason: LedgerTake for an
// aggregated take row.
func readReason(stored int64) throttle.LedgerReason {
	if stored == reasonMinuteOfTakes {
		return throttle.LedgerTake
	}
	return throttle.LedgerReason(stored)
}
