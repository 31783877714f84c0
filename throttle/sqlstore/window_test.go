package sqlstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

var windowKey = throttle.Key{Policy: "BUSY", Env: "prod", Identifier: "payer-1"}

var windowPolicies = throttle.Policies{
	"BUSY":  {Name: "BUSY", Capacity: 30_000, RefillTokens: 25_000, RefillPeriod: time.Minute, Refill: throttle.RefillStepwise},
	"QUIET": {Name: "QUIET", Capacity: 100, RefillTokens: 2, RefillPeriod: time.Minute, Refill: throttle.RefillStepwise},
}

// seededRow is what seedLedger writes as the i-th row (0-based) of a
// bucket: every 40th a refusal, every 1000th (from the 500th) a minute of
// 5 aggregated takes, the others single takes; balances follow a pattern.
func seededRow(i int64) (reason, delta, balance, n int64) {
	switch {
	case i%40 == 39:
		return int64(throttle.LedgerRefusedEmpty), 0, (i * 7) % 1000, 1
	case i%1000 == 500:
		return 10, -5, (i * 7) % 1000, 5 // reason 10: takes of one minute
	}
	return int64(throttle.LedgerTake), -1, (i * 7) % 1000, 1
}

// seedLedger writes, in one statement, total ledger rows from start, one
// every step: the rows i with i%every == 0 belong to key's bucket (created
// first by a real take before start, and chained by prev like the store's
// own rows, its head moved to the last), the others to a bucket of QUIET.
// It returns how many rows key got. The PostgreSQL identity is not moved
// past the rows: the store is for reading afterwards.
func seedLedger(tb testing.TB, s *sqlstore.Store, clock *throttle.ManualClock, key throttle.Key, start time.Time, step time.Duration, total, every int64) int64 {
	tb.Helper()
	ctx := context.Background()
	lim, err := throttle.NewLimiter(s, windowPolicies, throttle.Config{Clock: clock.Now})
	require.NoError(tb, err)
	clock.Set(start.Add(-5 * time.Minute))
	other := throttle.Key{Policy: "QUIET", Env: "prod", Identifier: "other"}
	for _, k := range []throttle.Key{key, other} {
		_, err = lim.Take(ctx, "", throttle.Charge{Key: k, Cost: 1})
		require.NoError(tb, err)
	}
	db := s.DB()
	var base int64
	require.NoError(tb, db.QueryRow(`SELECT max(id) FROM balde_token_ledger`).Scan(&base))
	var keyPolicy, otherPolicy int64
	q := db.Rebind(`SELECT policy_id FROM balde_buckets WHERE env = ? AND identifier = ?`)
	require.NoError(tb, db.QueryRow(q, key.Env, key.Identifier).Scan(&keyPolicy))
	require.NoError(tb, db.QueryRow(q, other.Env, other.Identifier).Scan(&otherPolicy))
	var firstKey, firstOther int64
	q = db.Rebind(`SELECT last_entry FROM balde_buckets WHERE env = ? AND identifier = ?`)
	require.NoError(tb, db.QueryRow(q, key.Env, key.Identifier).Scan(&firstKey))
	require.NoError(tb, db.QueryRow(q, other.Env, other.Identifier).Scan(&firstOther))

	// Row i has id base+1+i; key's rows are i = 0, every, 2*every..., the
	// j-th of them written as seededRow(j). key's first row points to the
	// take above, the others every rows back. The other bucket's rows point
	// to the row before, or two back past one of key's, the first to its
	// take.
	insert := `
		WITH RECURSIVE seq(i) AS (
			SELECT CAST(0 AS BIGINT)
			UNION ALL
			SELECT i + 1 FROM seq WHERE i + 1 < CAST(? AS BIGINT)
		),
		numbered AS (
			SELECT i, i / CAST(? AS BIGINT) AS j, CASE WHEN i % CAST(? AS BIGINT) = 0 THEN 1 ELSE 0 END AS mine
			FROM seq
		)
		INSERT INTO balde_token_ledger (id, policy_id, env, identifier, at, reason, delta, balance, n, prev)
		SELECT
			CAST(? AS BIGINT) + 1 + i,
			CASE WHEN mine = 1 THEN CAST(? AS BIGINT) ELSE CAST(? AS BIGINT) END,
			CAST(? AS TEXT),
			CASE WHEN mine = 1 THEN CAST(? AS TEXT) ELSE CAST(? AS TEXT) END,
			CAST(? AS BIGINT) + i * CAST(? AS BIGINT),
			CASE WHEN mine = 0 THEN 1 WHEN j % 40 = 39 THEN 6 WHEN j % 1000 = 500 THEN 10 ELSE 1 END,
			CASE WHEN mine = 0 THEN -1 WHEN j % 40 = 39 THEN 0 WHEN j % 1000 = 500 THEN -5 ELSE -1 END,
			CASE WHEN mine = 0 THEN 50 ELSE (j * 7) % 1000 END,
			CASE WHEN mine = 1 AND j % 1000 = 500 AND j % 40 <> 39 THEN 5 ELSE 1 END,
			CASE
				WHEN mine = 1 AND i = 0 THEN CAST(? AS BIGINT)
				WHEN mine = 1 THEN CAST(? AS BIGINT) + 1 + i - CAST(? AS BIGINT)
				WHEN i = 1 THEN CAST(? AS BIGINT)
				WHEN (i - 1) % CAST(? AS BIGINT) = 0 THEN CAST(? AS BIGINT) + i - 1
				ELSE CAST(? AS BIGINT) + i
			END
		FROM numbered`
	_, err = db.Exec(db.Rebind(insert), total, every, every,
		base, keyPolicy, otherPolicy, key.Env, key.Identifier, other.Identifier, start.UnixNano(), int64(step),
		firstKey, base, every, firstOther, every, base, base)
	require.NoError(tb, err)
	mine := (total + every - 1) / every
	_, err = db.Exec(db.Rebind(`UPDATE balde_buckets SET last_entry = ? WHERE env = ? AND identifier = ?`),
		base+1+(mine-1)*every, key.Env, key.Identifier)
	require.NoError(tb, err)
	if every > 1 {
		var last int64
		require.NoError(tb, db.QueryRow(db.Rebind(`SELECT max(id) FROM balde_token_ledger WHERE identifier = ?`), other.Identifier).Scan(&last))
		_, err = db.Exec(db.Rebind(`UPDATE balde_buckets SET last_entry = ? WHERE env = ? AND identifier = ?`), last, other.Env, other.Identifier)
		require.NoError(tb, err)
	}
	if s.Engine() == sqlstore.Postgres {
		_, err = db.Exec(`ANALYZE balde_token_ledger`)
		require.NoError(tb, err)
	}
	return mine
}

// A 24,000-row hour of one bucket (400 rows a minute; the bucket page read
// at most 20,000 raw rows, the newest 50 minutes of it) folds into the
// window's 360 slots of 10 s, from the window's start, with each slot's
// last balance and refusal count.
func TestLedgerWindowFoldsABusyHourInSQL(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		clock := throttle.NewManualClock(throttletest.Epoch)
		s := sqlstoretest.MustOpen(t, engine, clock.Now)
		from := throttletest.Epoch.Add(time.Hour)
		const rows, step = 24_000, 150 * time.Millisecond
		require.Equal(t, int64(rows), seedLedger(t, s, clock, windowKey, from, step, rows, 1))
		now := from.Add(time.Hour)
		clock.Set(now)

		q := inspect.LedgerWindowQuery{Key: windowKey, From: from, To: now, Slots: 360}
		w, err := s.LedgerWindow(t.Context(), q)
		require.NoError(t, err)
		require.False(t, w.Partial)
		// The answer is bounded by the slots, not the rows.
		require.Len(t, w.Slots, 360)
		require.Equal(t, 0, w.Slots[0].Index)
		require.Equal(t, from, w.Slots[0].Start)
		require.Equal(t, from, w.Slots[0].First, "the first slot starts at the window's start")

		// Each slot against the rows written into it.
		type want struct{ close, refused, events int64 }
		wants := make([]want, 360)
		for i := range int64(rows) {
			slot := time.Duration(i) * step / (10 * time.Second)
			reason, _, balance, n := seededRow(i)
			if reason == int64(throttle.LedgerRefusedEmpty) {
				wants[slot].refused += n
				continue
			}
			wants[slot].close = balance
			wants[slot].events += n
		}
		for i, sl := range w.Slots {
			require.Equal(t, i, sl.Index)
			require.Equal(t, wants[i], want{sl.Close, sl.Refused, sl.Events}, "slot %d", i)
		}
		// The last row is a refusal: the last balance is the row's before.
		_, _, lastBalance, _ := seededRow(rows - 2)
		require.Equal(t, lastBalance, w.Slots[359].Close)
		require.Equal(t, int64(986), lastBalance)

		// A window of the last 50 minutes starts at its own start too.
		q.From = now.Add(-50 * time.Minute)
		w, err = s.LedgerWindow(t.Context(), q)
		require.NoError(t, err)
		require.Len(t, w.Slots, 360)
		require.Equal(t, q.From, w.Slots[0].First)
	})
}

// A quiet bucket's rows spread among a million of another bucket's: the
// chain walk reads the quiet bucket's rows only.
func TestLedgerWindowReadsOnlyTheBucket(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		clock := throttle.NewManualClock(throttletest.Epoch)
		s := sqlstoretest.MustOpen(t, engine, clock.Now)
		from := throttletest.Epoch.Add(time.Hour)
		mine := seedLedger(t, s, clock, windowKey, from, 36*time.Millisecond, 100_000, 100)
		require.Equal(t, int64(1000), mine)
		now := from.Add(time.Hour)
		q := inspect.LedgerWindowQuery{Key: windowKey, From: from, To: now, Slots: 360}
		w, err := s.LedgerWindow(t.Context(), q)
		require.NoError(t, err)
		var events, refused int64
		for _, sl := range w.Slots {
			events, refused = events+sl.Events, refused+sl.Refused
		}
		require.Equal(t, int64(25), refused)                                 // i/100 % 40 == 39
		require.Equal(t, int64(975+4), events)                               // one row of 5 takes
		require.Equal(t, from, w.Slots[0].First)                             // the first of the bucket's rows
		require.Equal(t, int64((998*7)%1000), w.Slots[len(w.Slots)-1].Close) // 999 is a refusal
	})
}

// The window's queries find their rows by primary key (the chain walk, the
// id range, the joins back to each slot's first and last rows), never by a
// scan of the ledger: EXPLAIN QUERY PLAN on SQLite, EXPLAIN on PostgreSQL,
// over a 100,000-row ledger, the range being its last 10,000 ids.
func TestLedgerWindowQueryPlan(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		clock := throttle.NewManualClock(throttletest.Epoch)
		s := sqlstoretest.MustOpen(t, engine, clock.Now)
		from := throttletest.Epoch.Add(time.Hour)
		seedLedger(t, s, clock, windowKey, from, 36*time.Millisecond, 100_000, 100)
		explain := `EXPLAIN QUERY PLAN `
		if engine == sqlstore.Postgres {
			explain = `EXPLAIN `
		}
		var policyID, head int64
		require.NoError(t, s.DB().QueryRow(s.DB().Rebind(`SELECT policy_id, last_entry FROM balde_buckets WHERE identifier = ?`), windowKey.Identifier).Scan(&policyID, &head))
		k := []any{policyID, windowKey.Env, windowKey.Identifier}
		window := []any{from.UnixNano(), from.Add(time.Hour).UnixNano(), 359, from.UnixNano(), int64(10 * time.Second), from.Add(time.Hour).UnixNano()}
		for _, tt := range []struct {
			name string
			cte  string
			args []any
		}{
			{"walk", sqlstore.WalkCTE, append(append(append([]any{head}, k...), from.Add(-time.Minute).UnixNano(), 2_000_000), k...)},
			{"range", sqlstore.RangeCTE, append([]any{head - 10_000, head}, k...)},
		} {
			rows, err := s.DB().Query(s.DB().Rebind(explain+sqlstore.LedgerWindowSQL(tt.cte)), append(tt.args, window...)...)
			require.NoError(t, err)
			cols, err := rows.Columns()
			require.NoError(t, err)
			var plan []string
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				require.NoError(t, rows.Scan(ptrs...))
				plan = append(plan, fmt.Sprint(vals[len(vals)-1]))
			}
			require.NoError(t, rows.Err())
			rows.Close()
			text := strings.Join(plan, "\n")
			t.Logf("%s plan:\n%s", tt.name, text)
			for _, line := range plan {
				if engine == sqlstore.SQLite {
					require.False(t, strings.Contains(line, "SCAN") && strings.Contains(line, "balde_token_ledger") &&
						!strings.Contains(line, "PRIMARY KEY"), "full scan of the ledger: %s", line)
				} else {
					require.NotContains(t, line, "Seq Scan on balde_token_ledger")
				}
			}
			require.Contains(t, text, map[sqlstore.Engine]string{sqlstore.SQLite: "INTEGER PRIMARY KEY", sqlstore.Postgres: "balde_token_ledger_pkey"}[engine])
		}
	})
}
