// Package sqlstoretest opens real SQL stores for tests: a SQLite file in a
// temporary directory, or a fresh schema in the PostgreSQL named by
// BALDE_TEST_POSTGRES_DSN (the test is skipped, with a message, without it).
package sqlstoretest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"flag"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/alldrivers"
	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// PostgresEnv names the variable holding the PostgreSQL DSN for tests.
const PostgresEnv = "BALDE_TEST_POSTGRES_DSN"

var dump = flag.Bool("dump", false, "keep SQLite test databases and print their paths")

// Engines are the engines a store test runs on.
var Engines = []sqlstore.Engine{sqlstore.SQLite, sqlstore.Postgres}

// DSN returns the DSN of a new, empty, migrated database for one test on
// engine: a SQLite file in tb.TempDir(), or a new schema in PostgreSQL that
// is dropped at cleanup. It skips the test when engine is PostgreSQL and
// BALDE_TEST_POSTGRES_DSN is not set.
func DSN(tb testing.TB, engine sqlstore.Engine) string {
	tb.Helper()
	var dsn string
	switch engine {
	case sqlstore.SQLite:
		dir := tb.TempDir()
		if *dump {
			d, err := os.MkdirTemp("", "balde-test-")
			require.NoError(tb, err)
			dir = d
			tb.Logf("SQLite database kept at %s", filepath.Join(dir, "balde.db"))
		}
		dsn = "sqlite://" + filepath.Join(dir, "balde.db")
	case sqlstore.Postgres:
		dsn = PostgresSchema(tb)
	default:
		tb.Fatalf("unknown engine %q", engine)
	}
	require.NoError(tb, alldrivers.Migrate(context.Background(), dsn, func(m *migrations.Migrator) error { return m.Up() }))
	return dsn
}

// PostgresSchema creates a schema of its own for one test in the database of
// BALDE_TEST_POSTGRES_DSN and returns a DSN whose search_path points at it;
// the schema is dropped at cleanup. It skips the test without the variable.
func PostgresSchema(tb testing.TB) string {
	tb.Helper()
	base := os.Getenv(PostgresEnv)
	if base == "" {
		tb.Skip(PostgresEnv + " not set: skipping PostgreSQL")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	db, err := sql.Open("pgx", base)
	require.NoError(tb, err)
	db.SetMaxIdleConns(0) // no connection held between the create and the drop
	tb.Cleanup(func() {
		_, _ = db.Exec(`DROP SCHEMA ` + schema + ` CASCADE`)
		_ = db.Close()
	})
	_, err = db.Exec(`CREATE SCHEMA ` + schema)
	require.NoError(tb, err, "create schema in %s", PostgresEnv)
	return withParam(tb, base, "search_path", schema)
}

// MustOpen opens a migrated store on a new database for one test and closes
// it at cleanup.
func MustOpen(tb testing.TB, engine sqlstore.Engine, clock throttle.Clock) *sqlstore.Store {
	tb.Helper()
	return MustOpenDSN(tb, DSN(tb, engine), clock)
}

// MustOpenDSN opens a store on an existing database (another process or
// another store of the same test may share it) and closes it at cleanup.
func MustOpenDSN(tb testing.TB, dsn string, clock throttle.Clock) *sqlstore.Store {
	tb.Helper()
	s, err := alldrivers.Open(context.Background(), dsn, sqlstore.Options{Clock: clock})
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, s.Close()) })
	return s
}

// TerminateSessions ends with pg_terminate_backend (SQLSTATE 57P01, the
// fault the store's retries are for) every PostgreSQL session whose
// application_name is app, a test's own, and returns how many.
func TerminateSessions(tb testing.TB, app string) int {
	tb.Helper()
	db, err := sql.Open("pgx", os.Getenv(PostgresEnv))
	require.NoError(tb, err)
	defer db.Close()
	var n int
	require.NoError(tb, db.QueryRow(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND pid <> pg_backend_pid()`, app).Scan(&n))
	return n
}

// WithApplicationName returns the PostgreSQL dsn with application_name set
// to app, so that TerminateSessions finds its sessions.
func WithApplicationName(tb testing.TB, dsn, app string) string {
	tb.Helper()
	return withParam(tb, dsn, "application_name", app)
}

// withParam returns the URL dsn with its query parameter key set to value.
func withParam(tb testing.TB, dsn, key, value string) string {
	tb.Helper()
	u, err := url.Parse(dsn)
	require.NoError(tb, err)
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// ForEachEngine runs fn as a subtest per engine ("sqlite", "postgres").
func ForEachEngine(t *testing.T, fn func(t *testing.T, engine sqlstore.Engine)) {
	for _, e := range Engines {
		t.Run(string(e), func(t *testing.T) { fn(t, e) })
	}
}

// SoundSQLiteFile returns the bytes of a migrated balde SQLite database
// holding a few hundred pages of data (a table of filler rows beside
// balde's), checkpointed: the raw material of the bad files tests make.
func SoundSQLiteFile(t *testing.T) []byte {
	t.Helper()
	sound := filepath.Join(t.TempDir(), "sound.db")
	s, err := alldrivers.Open(context.Background(), "sqlite://"+sound, sqlstore.Options{Migrate: true})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	db, err := sql.Open("sqlite", "file:"+sound)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE filler (x BLOB)`)
	require.NoError(t, err)
	_, err = db.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
		INSERT INTO filler SELECT randomblob(100) FROM n`)
	require.NoError(t, err)
	require.NoError(t, db.Close()) // checkpoints the WAL into the file

	b, err := os.ReadFile(sound)
	require.NoError(t, err)
	require.Greater(t, len(b), 20*SQLitePage)
	return b
}

// SQLitePage is the page size of the files SoundSQLiteFile makes.
const SQLitePage = 4096

// Garble writes n bytes of a fixed pseudo-random sequence (the same each
// run) over b from offset at, and returns b.
func Garble(b []byte, at, n int) []byte {
	r := mrand.New(mrand.NewPCG(23, 3))
	for i := range n {
		b[at+i] = byte(r.Uint32())
	}
	return b
}

// CorruptSQLiteCopy returns the path of a SoundSQLiteFile garbled over 200
// bytes of a data page: a file SQLite opens but whose integrity check fails.
func CorruptSQLiteCopy(t *testing.T) string {
	t.Helper()
	b := SoundSQLiteFile(t)
	Garble(b, (len(b)/SQLitePage-5)*SQLitePage, 200) // a page of filler's, near the end
	bad := filepath.Join(t.TempDir(), "copy.db")
	require.NoError(t, os.WriteFile(bad, b, 0o644))
	return bad
}
