package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// failures is a throttle.Observer that counts the store failures of Takes
// (throttle.StoreObserver).
type failures struct {
	mu               sync.Mutex
	timeouts, others int
	failedOpen       int
}

func (*failures) Decided(throttle.Decision, time.Duration) {}
func (*failures) SeverityChanged(throttle.SeverityChange)  {}
func (f *failures) FailedOpen(throttle.Key, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failedOpen++
}
func (f *failures) StoreFailed(_ throttle.Key, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if errors.Is(err, throttle.ErrStoreTimeout) {
		f.timeouts++
	} else {
		f.others++
	}
}

// TestAStatementTimeoutIsABoundedStoreTimeout: on PostgreSQL a decision
// whose statement runs past statement_timeout (57014: here waiting on a
// bucket row another session holds FOR UPDATE, with lock_timeout off) ends
// within the bound in ErrStoreUnavailable wrapping ErrStoreTimeout — or,
// for a policy that fails open, in an admitting Decision marked FailOpen —
// and is counted as a timeout, durable or not, alone or through group
// commit (the inbound limiter's way).
func TestAStatementTimeoutIsABoundedStoreTimeout(t *testing.T) {
	ctx := context.Background()
	dsn := sqlstoretest.DSN(t, sqlstore.Postgres)
	const bound = 300 * time.Millisecond
	store := sqlstoretest.MustOpenDSN(t, dsn+"&lock_timeout=0&statement_timeout=300ms", nil)

	_, driverDSN, err := sqlstore.ParseDSN(dsn)
	require.NoError(t, err)
	other, err := sql.Open("pgx", strings.Replace(driverDSN, "statement_timeout=30s", "statement_timeout=0", 1))
	require.NoError(t, err)
	defer other.Close()

	for _, tc := range []struct {
		name    string
		mode    throttle.FailMode
		target  func() throttle.Store
		grouped bool
	}{
		{"Durable/FailClosed", throttle.FailClosed, func() throttle.Store { return store }, false},
		{"Durable/FailOpen", throttle.FailOpen, func() throttle.Store { return store }, false},
		{"NonDurableGrouped/FailClosed", throttle.FailClosed, store.NonDurable, true},
		{"NonDurableGrouped/FailOpen", throttle.FailOpen, store.NonDurable, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := throttle.Policy{Name: "P" + strings.ReplaceAll(tc.name, "/", ""), Capacity: 10, RefillTokens: 1, RefillPeriod: time.Hour, FailMode: tc.mode}
			var target throttle.Store = tc.target()
			if tc.grouped {
				g := throttle.NewGroupCommit(target, throttle.GroupCommitOptions{Writers: 2})
				defer g.Close()
				target = g
			}
			obs := &failures{}
			lim, err := throttle.NewLimiter(target, throttle.Policies{p.Name: p}, throttle.Config{Observer: obs})
			require.NoError(t, err)
			key := throttle.Key{Policy: p.Name, Env: "test", Identifier: "k"}
			_, err = lim.Take(ctx, "", throttle.Charge{Key: key, Cost: 1})
			require.NoError(t, err)

			holder, err := other.Conn(ctx)
			require.NoError(t, err)
			defer holder.Close()
			_, err = holder.ExecContext(ctx, `BEGIN`)
			require.NoError(t, err)
			defer holder.ExecContext(context.Background(), `ROLLBACK`) //nolint:errcheck
			_, err = holder.ExecContext(ctx, `SELECT * FROM balde_buckets FOR UPDATE`)
			require.NoError(t, err)

			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			start := time.Now()
			d, err := lim.Take(dctx, "", throttle.Charge{Key: key, Cost: 1})
			took := time.Since(start)
			require.Less(t, took, bound+2*time.Second, "a decision past statement_timeout")
			if tc.mode == throttle.FailOpen {
				require.NoError(t, err)
				require.True(t, d.Allowed && d.FailOpen)
			} else {
				require.ErrorIs(t, err, throttle.ErrStoreUnavailable)
				require.ErrorIs(t, err, throttle.ErrStoreTimeout)
				require.Contains(t, err.Error(), "57014")
			}
			require.Equal(t, 1, obs.timeouts, "the timeout is counted")
			require.Zero(t, obs.others)
			t.Logf("failed after %s: %v", took.Round(time.Millisecond), err)
		})
	}
}
