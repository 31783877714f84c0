package sqlstore_test

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// TestAWaitOnAStoppedLockHolderIsBounded holds the lock a decision needs
// from another connection that never lets go (a process stopped inside its
// transaction): on PostgreSQL a bucket row FOR UPDATE, on SQLite the write
// lock (BEGIN IMMEDIATE). A decision fails with ErrStoreUnavailable within
// the lock bound (lock_timeout; on SQLite the retries' 5 s, plus one
// busy_timeout at most), and
// one whose context is cancelled meanwhile (a signal) returns within 1 s
// of the cancel. Issue 23: dict-lookup waited 74 s on a row lock, a web
// lookup ~42 s on a stopped SQLite writer. Under make reliability the
// defaults are used (5 s each); in make test, 1 s.
func TestAWaitOnAStoppedLockHolderIsBounded(t *testing.T) {
	long := os.Getenv("BALDE_RELIABILITY") != ""
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := context.Background()
		dsn := sqlstoretest.DSN(t, engine)
		bound := 5 * time.Second // the defaults: lock_timeout, busy_timeout
		open := dsn
		if !long {
			bound = time.Second
			if engine == sqlstore.Postgres {
				open += "&lock_timeout=1s"
			} else {
				open += "?_pragma=busy_timeout(1000)"
			}
		}
		if engine == sqlstore.SQLite {
			bound += 5 * time.Second // the retries stop once a call has spent 5 s
		}
		store := sqlstoretest.MustOpenDSN(t, open, nil)
		p := throttle.Policy{Name: "P", Capacity: 10, RefillTokens: 1, RefillPeriod: time.Hour}
		lim, err := throttle.NewLimiter(store, throttle.Policies{"P": p}, throttle.Config{})
		require.NoError(t, err)
		key := throttle.Key{Policy: "P", Env: "test", Identifier: "k"}
		_, err = lim.Take(ctx, "", throttle.Charge{Key: key, Cost: 1})
		require.NoError(t, err)

		// The stopped holder.
		_, driverDSN, err := sqlstore.ParseDSN(dsn)
		require.NoError(t, err)
		driver := map[sqlstore.Engine]string{sqlstore.SQLite: "sqlite", sqlstore.Postgres: "pgx"}[engine]
		other, err := sql.Open(driver, strings.Replace(driverDSN, "statement_timeout=30s", "statement_timeout=0", 1))
		require.NoError(t, err)
		defer other.Close()
		holder, err := other.Conn(ctx)
		require.NoError(t, err)
		defer holder.Close()
		if engine == sqlstore.SQLite {
			_, err = holder.ExecContext(ctx, `BEGIN IMMEDIATE`)
		} else {
			_, err = holder.ExecContext(ctx, `BEGIN`)
			require.NoError(t, err)
			_, err = holder.ExecContext(ctx, `SELECT * FROM balde_buckets FOR UPDATE`)
		}
		require.NoError(t, err)
		defer holder.ExecContext(context.Background(), `ROLLBACK`) //nolint:errcheck

		// The deadline only keeps a regression from hanging the test.
		dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
		defer dcancel()
		start := time.Now()
		_, err = lim.Take(dctx, "", throttle.Charge{Key: key, Cost: 1})
		took := time.Since(start)
		require.ErrorIs(t, err, throttle.ErrStoreUnavailable)
		require.ErrorIs(t, err, throttle.ErrStoreTimeout, "lock_timeout (55P03) or SQLITE_BUSY past the retries")
		require.Less(t, took, bound+time.Second, "a decision facing a stopped lock holder")
		t.Logf("%s: a decision facing a stopped lock holder failed after %s (bound %s): %v", engine, took.Round(time.Millisecond), bound, err)

		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(300*time.Millisecond, cancel)
		start = time.Now()
		_, err = lim.Take(cctx, "", throttle.Charge{Key: key, Cost: 1})
		took = time.Since(start)
		require.Error(t, err)
		require.Less(t, took, 300*time.Millisecond+time.Second, "a cancelled decision returns within 1 s of the cancel")
		t.Logf("%s: cancelled 300 ms into the wait, the decision returned after %s: %v", engine, took.Round(time.Millisecond), err)
	})
}
