package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	_ "github.com/balde-throttle/balde/throttle/sqlstore/pgxdriver"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// TestUpWaitsForAKilledMigratorsTransaction reproduces, step by step, a
// "migrate up" killed while PostgreSQL still runs its migration: the
// client's sessions end (so golang-migrate's session advisory lock is
// released at once) except the backend inside the migration's transaction,
// which still commits. A second Up started at that instant ran the same
// CREATE TABLE beside it and failed with a duplicate key on pg_type
// (pg_type_typname_nsp_index) once the first committed; it must wait for
// that transaction and find the migration landed.
func TestUpWaitsForAKilledMigratorsTransaction(t *testing.T) {
	dsn := sqlstoretest.PostgresSchema(t) // skips without PostgreSQL
	latest, err := migrations.Latest(migrations.Postgres)
	require.NoError(t, err)
	withApp := func(name string) string {
		u, err := url.Parse(dsn)
		require.NoError(t, err)
		q := u.Query()
		q.Set("application_name", name+"_"+q.Get("search_path"))
		u.RawQuery = q.Encode()
		return u.String()
	}
	open := func(app string) (*migrations.Migrator, string) {
		app = "balde_" + app
		pgx, err := sqlstore.DriverOf(sqlstore.Postgres)
		require.NoError(t, err)
		db, err := sql.Open("pgx", withApp(app))
		require.NoError(t, err)
		m, err := migrations.New(db, pgx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Close() })
		u, _ := url.Parse(withApp(app))
		return m, u.Query().Get("application_name")
	}
	admin, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	first, firstApp := open("first")
	reached := make(chan int, 1) // the backend pid of the first's transaction
	release := make(chan struct{})
	errKilled := errors.New("killed")
	calls := 0
	migrations.SetBeforeCommit(first, func(tx *sql.Tx) error {
		calls++
		if calls > 1 {
			return errKilled // the client is dead: nothing after the first commit
		}
		var pid int
		if err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			return err
		}
		reached <- pid
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	firstDone := make(chan error, 1)
	go func() { firstDone <- first.Up() }()
	var txPid int
	select {
	case txPid = <-reached:
	case <-ctx.Done():
		t.Fatal("the first Up did not reach its first commit within 60 s")
	}
	// The kill: every session of the first client ends but the one inside
	// the migration's transaction, as the server sees a SIGKILLed client
	// whose backend is still busy.
	var killed int
	require.NoError(t, admin.QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND pid <> $2`, firstApp, txPid).Scan(&killed))
	require.Positive(t, killed, "the first client's lock session")

	second, secondApp := open("second")
	secondDone := make(chan error, 1)
	go func() { secondDone <- second.Up() }()
	// The second waits on a lock the first's transaction holds (before the
	// fix: on its pg_type row; now: on the migration's transaction lock).
	require.Eventually(t, func() bool {
		var n int
		err := admin.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, secondApp).Scan(&n)
		return err == nil && n > 0
	}, 30*time.Second, 10*time.Millisecond, "the second Up never waited on the first's transaction")
	close(release)

	select {
	case err := <-secondDone:
		require.NoError(t, err, "the second Up after the first was killed")
	case <-ctx.Done():
		t.Fatal("the second Up did not end within 60 s")
	}
	select {
	case <-firstDone: // failed or not: its client is dead
	case <-ctx.Done():
		t.Fatal("the first Up did not end within 60 s")
	}
	v, dirty, err := second.Version()
	require.NoError(t, err)
	require.False(t, dirty)
	require.Equal(t, latest, v)
}
