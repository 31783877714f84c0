package migrations_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/alldrivers"
	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// emptyDatabase returns the DSN of an empty database for engine and a raw
// handle on it, closed at cleanup.
func emptyDatabase(t *testing.T, engine sqlstore.Engine) (string, *sql.DB) {
	t.Helper()
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "app.db")
	if engine == sqlstore.Postgres {
		dsn = sqlstoretest.PostgresSchema(t)
	}
	_, driverDSN, err := sqlstore.ParseDSN(dsn)
	require.NoError(t, err)
	driver := map[sqlstore.Engine]string{sqlstore.SQLite: "sqlite", sqlstore.Postgres: "pgx"}[engine]
	db, err := sql.Open(driver, driverDSN)
	require.NoError(t, err)
	db.SetMaxOpenConns(1) // one connection: the SQLite file and the search_path stay the same
	t.Cleanup(func() { db.Close() })
	return dsn, db
}

func exec(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		_, err := db.Exec(s)
		require.NoError(t, err, s)
	}
}

func count(t *testing.T, db *sql.DB, query string) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(query).Scan(&n), query)
	return n
}

// legacySchema builds in db the schema balde's migrations 0001 to version
// left before the balde_ prefix (testdata/legacy, one file a version), with
// that version in schema_migrations.
func legacySchema(t *testing.T, db *sql.DB, engine sqlstore.Engine, version int) {
	t.Helper()
	dir := filepath.Join("testdata", "legacy", string(engine))
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, files, 4)
	for _, f := range files[:version] {
		body, err := os.ReadFile(filepath.Join(dir, f.Name()))
		require.NoError(t, err)
		exec(t, db, string(body))
	}
	exec(t, db,
		`CREATE TABLE schema_migrations (version BIGINT NOT NULL PRIMARY KEY, dirty BOOLEAN NOT NULL)`,
		fmt.Sprintf(`INSERT INTO schema_migrations (version, dirty) VALUES (%d, false)`, version))
}

func migrateUp(t *testing.T, dsn string) {
	t.Helper()
	require.NoError(t, alldrivers.Migrate(context.Background(), dsn, func(m *migrations.Migrator) error { return m.Up() }))
}

// TestUpgradeFromUnprefixedSchema builds a database exactly as balde's
// migrations 0001-0004 left it before the balde_ prefix (versions in
// schema_migrations), with data in it, and checks that migrating upgrades it
// in place: the data is kept under the prefixed names, the version moves to
// balde_schema_migrations, and the old names are free for the application.
func TestUpgradeFromUnprefixedSchema(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		dsn, db := emptyDatabase(t, engine)
		legacySchema(t, db, engine, 4)
		exec(t, db,
			`INSERT INTO policies (name) VALUES ('SIFEN_RECEPCION_LOTE')`,
			`INSERT INTO buckets (policy_id, env, identifier, tokens, refilled_at) VALUES (1, 'test', '80012345', 0, 1)`,
			`INSERT INTO documents (env, ruc, dv, cdc, de_type, xml, status, created_at, updated_at)
			 VALUES ('test', '80012345', 1, 'cdc-1', 1, '<rDE/>', 'sent', 1, 1)`,
		)

		migrateUp(t, dsn)

		latest, err := migrations.Latest(engine)
		require.NoError(t, err)
		require.Equal(t, int(latest), count(t, db, `SELECT version FROM balde_schema_migrations`))
		require.Equal(t, 1, count(t, db, `SELECT COUNT(*) FROM balde_buckets WHERE identifier = '80012345' AND tokens = 0`))
		require.Equal(t, 1, count(t, db, `SELECT COUNT(*) FROM balde_documents WHERE cdc = 'cdc-1'`))
		// The application may now create the names balde used to take,
		// including PostgreSQL's derived ones (documents_pkey, policies_id_seq).
		exec(t, db,
			`CREATE TABLE schema_migrations (version BIGINT NOT NULL PRIMARY KEY, dirty BOOLEAN NOT NULL)`,
			`CREATE TABLE documents (id INTEGER PRIMARY KEY)`,
			`CREATE TABLE policies (id INTEGER PRIMARY KEY, name TEXT UNIQUE)`,
		)
		exec(t, db, `CREATE INDEX token_ledger_events ON documents (id)`, `CREATE INDEX documents_status ON documents (id)`)
		if engine == sqlstore.Postgres {
			exec(t, db, `CREATE SEQUENCE policies_id_seq`)
		}

		s, err := alldrivers.Open(context.Background(), dsn, sqlstore.Options{})
		require.NoError(t, err)
		defer s.Close()
		v, dirty, err := s.SchemaVersion(context.Background())
		require.NoError(t, err)
		require.Equal(t, latest, v)
		require.False(t, dirty)
	})
}

// TestBesideAnApplicationSchema migrates balde into a database that already
// has the application's own golang-migrate history (schema_migrations at
// version 57) and a "documents" table: balde's migrations go up and down
// beside them and leave both untouched.
func TestBesideAnApplicationSchema(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		dsn, db := emptyDatabase(t, engine)
		exec(t, db,
			`CREATE TABLE schema_migrations (version BIGINT NOT NULL PRIMARY KEY, dirty BOOLEAN NOT NULL)`,
			`INSERT INTO schema_migrations (version, dirty) VALUES (57, false)`,
			`CREATE TABLE documents (id INTEGER PRIMARY KEY, title TEXT NOT NULL)`,
			`INSERT INTO documents (id, title) VALUES (1, 'the app''s own')`,
		)
		appState := func() string {
			var v int
			var dirty bool
			var title string
			require.NoError(t, db.QueryRow(`SELECT version, dirty FROM schema_migrations`).Scan(&v, &dirty))
			require.NoError(t, db.QueryRow(`SELECT title FROM documents WHERE id = 1`).Scan(&title))
			return fmt.Sprintf("v%d dirty=%t %q", v, dirty, title)
		}
		want := appState()

		migrateUp(t, dsn)
		require.Equal(t, want, appState())
		require.Equal(t, 0, count(t, db, `SELECT COUNT(*) FROM balde_documents`))

		require.NoError(t, alldrivers.Migrate(context.Background(), dsn, func(m *migrations.Migrator) error {
			for {
				v, _, err := m.Version()
				if err != nil || v == 0 {
					return err
				}
				if err := m.Down(); err != nil {
					return err
				}
			}
		}))
		require.Equal(t, want, appState())
		migrateUp(t, dsn)
		require.Equal(t, want, appState())
	})
}

// TestApplicationTablesNamedLikeBaldesAreNotAdopted: an application whose
// own history is at version 57 and which happens to have tables named
// buckets and token_ledger is not mistaken for an old balde database: its
// tables keep their names and its schema_migrations stays.
func TestApplicationTablesNamedLikeBaldesAreNotAdopted(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		dsn, db := emptyDatabase(t, engine)
		exec(t, db,
			`CREATE TABLE schema_migrations (version BIGINT NOT NULL PRIMARY KEY, dirty BOOLEAN NOT NULL)`,
			`INSERT INTO schema_migrations (version, dirty) VALUES (57, false)`,
			`CREATE TABLE buckets (id INTEGER PRIMARY KEY, label TEXT)`,
			`CREATE TABLE token_ledger (id INTEGER PRIMARY KEY)`,
			`INSERT INTO buckets (id, label) VALUES (1, 'the app''s own')`,
		)
		migrateUp(t, dsn)
		require.Equal(t, 57, count(t, db, `SELECT version FROM schema_migrations`))
		require.Equal(t, 1, count(t, db, `SELECT COUNT(*) FROM buckets WHERE label = 'the app''s own'`))
		require.Equal(t, 0, count(t, db, `SELECT COUNT(*) FROM balde_buckets`))
	})
}

// TestUpgradeLeavesTheApplicationsTablesOfLaterVersions: an old balde
// database at version 2 (before it had a documents table) beside the
// application's own "documents" table: the upgrade takes balde's tables of
// versions 1 and 2 only, the application's table keeps its name and rows,
// and balde's migration 0003 creates balde_documents beside it.
func TestUpgradeLeavesTheApplicationsTablesOfLaterVersions(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		dsn, db := emptyDatabase(t, engine)
		legacySchema(t, db, engine, 2)
		exec(t, db,
			`CREATE TABLE documents (id INTEGER PRIMARY KEY, title TEXT NOT NULL)`,
			`INSERT INTO documents (id, title) VALUES (1, 'the app''s own')`,
		)

		migrateUp(t, dsn)

		latest, err := migrations.Latest(engine)
		require.NoError(t, err)
		require.Equal(t, int(latest), count(t, db, `SELECT version FROM balde_schema_migrations`))
		require.Equal(t, 1, count(t, db, `SELECT COUNT(*) FROM documents WHERE title = 'the app''s own'`))
		require.Equal(t, 0, count(t, db, `SELECT COUNT(*) FROM balde_documents`))
		require.Equal(t, 0, count(t, db, `SELECT COUNT(*) FROM balde_buckets`))
	})
}
