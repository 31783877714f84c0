package sqlstore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// appDB opens an application's pool on engine (a SQLite file opened as
// sqlstore.SQLiteDSN says, or a schema of its own on PostgreSQL) holding the
// application's own golang-migrate history at version 57 and a documents
// table of its own.
func appDB(t *testing.T, engine sqlstore.Engine) *sql.DB {
	t.Helper()
	var db *sql.DB
	var err error
	if engine == sqlstore.SQLite {
		db, err = sql.Open("sqlite", sqlstore.SQLiteDSN(filepath.Join(t.TempDir(), "app.db")))
	} else {
		db, err = sql.Open("pgx", sqlstoretest.PostgresSchema(t))
	}
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	for _, stmt := range []string{
		`CREATE TABLE schema_migrations (version BIGINT NOT NULL PRIMARY KEY, dirty BOOLEAN NOT NULL)`,
		`INSERT INTO schema_migrations (version, dirty) VALUES (57, false)`,
		`CREATE TABLE documents (id INTEGER PRIMARY KEY, title TEXT NOT NULL)`,
		`INSERT INTO documents (id, title) VALUES (1, 'the app''s own')`,
	} {
		_, err := db.Exec(stmt)
		require.NoError(t, err, stmt)
	}
	return db
}

// requireAppUntouched checks the application's own rows after balde ran.
func requireAppUntouched(t *testing.T, db *sql.DB) {
	t.Helper()
	var version int64
	var dirty bool
	require.NoError(t, db.QueryRow(`SELECT version, dirty FROM schema_migrations`).Scan(&version, &dirty))
	require.Equal(t, int64(57), version)
	require.False(t, dirty)
	var title string
	require.NoError(t, db.QueryRow(`SELECT title FROM documents WHERE id = 1`).Scan(&title))
	require.Equal(t, "the app's own", title)
}

// driverOf is the registered Driver of engine.
func driverOf(t *testing.T, engine sqlstore.Engine) sqlstore.Driver {
	d, err := sqlstore.DriverOf(engine)
	require.NoError(t, err)
	return d
}

func TestOpenDBSharesTheApplicationsPool(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		db := appDB(t, engine)
		clock := throttle.NewManualClock(throttletest.Epoch)
		store, err := sqlstore.OpenDB(t.Context(), db, sqlstore.Options{Driver: driverOf(t, engine), Migrate: true, Clock: clock.Now})
		require.NoError(t, err)

		p := throttle.PerMinute("P", 2, 2)
		lim, err := throttle.NewLimiter(store, throttle.Policies{p.Name: p}, throttle.Config{Clock: store.Now})
		require.NoError(t, err)
		k := throttle.Key{Policy: "P", Env: "prod", Identifier: "x"}
		for _, want := range []bool{true, true, false} {
			d, err := lim.Take(t.Context(), "", throttle.Charge{Key: k, Cost: 1})
			require.NoError(t, err)
			require.Equal(t, want, d.Allowed)
		}
		version, dirty, err := store.SchemaVersion(t.Context())
		require.NoError(t, err)
		require.False(t, dirty)
		require.NotZero(t, version)

		require.NoError(t, store.Close())
		require.NoError(t, db.Ping(), "Close leaves the application's pool open")
		requireAppUntouched(t, db)

		// Opening again (migrations current) changes nothing either.
		store, err = sqlstore.OpenDB(t.Context(), db, sqlstore.Options{Driver: driverOf(t, engine), Migrate: true, Clock: clock.Now})
		require.NoError(t, err)
		lim, err = throttle.NewLimiter(store, throttle.Policies{p.Name: p}, throttle.Config{Clock: store.Now})
		require.NoError(t, err)
		st, err := lim.State(t.Context(), k)
		require.NoError(t, err)
		require.Equal(t, int64(2), st.SendCount, "the buckets outlived the store")
		require.NoError(t, store.Close())
		requireAppUntouched(t, db)
	})
}

func TestOpenDBRefusesASQLitePoolThatWouldFailUnderContention(t *testing.T) {
	tests := []struct {
		name  string
		query string
		want  string
	}{
		{"NoImmediateLock", "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)", "_txlock=immediate"},
		{"NoBusyTimeout", "_txlock=immediate&_pragma=journal_mode(WAL)", "busy_timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "app.db")+"?"+tt.query)
			require.NoError(t, err)
			defer db.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err = sqlstore.OpenDB(ctx, db, sqlstore.Options{Driver: driverOf(t, sqlstore.SQLite), Migrate: true})
			require.ErrorContains(t, err, tt.want)
			require.ErrorContains(t, err, "sqlstore.SQLiteDSN")
		})
	}
}

func TestOpenDBPostgresNeedsPgx(t *testing.T) {
	db, err := sql.Open("sqlite", sqlstore.SQLiteDSN(filepath.Join(t.TempDir(), "app.db")))
	require.NoError(t, err)
	defer db.Close()
	_, err = sqlstore.OpenDB(t.Context(), db, sqlstore.Options{Driver: driverOf(t, sqlstore.Postgres)})
	require.ErrorContains(t, err, "pgx")
}
