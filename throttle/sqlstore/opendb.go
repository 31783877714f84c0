package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"

	"github.com/jmoiron/sqlx"

	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle/sqlstore/internal/driverkit"
)

// SQLiteDSN returns the modernc.org/sqlite DSN an application should open
// its own pool of the SQLite file path with, to share it with a store of
// OpenDB: balde's pragmas (ParseDSN) and _txlock=immediate, so that write
// transactions take the write lock at BEGIN. "sqlite" is registered by
// importing sqlitedriver:
//
//	db, err := sql.Open("sqlite", sqlstore.SQLiteDSN("app.db"))
//	store, err := sqlitedriver.OpenDB(ctx, db, sqlstore.Options{Migrate: true})
func SQLiteDSN(path string) string {
	return sqliteDSN(path, "_txlock=immediate")
}

// OpenDB returns a store on an application's own pool, which it shares: the
// store's tables (balde_*) and migration versions (balde_schema_migrations)
// live beside the application's, and Close leaves db open. With
// opts.Migrate the pending migrations run first, on db (migrations.NewShared).
//
// SQLite: db must be a modernc.org/sqlite pool whose DSN has
// _txlock=immediate and a busy_timeout (SQLiteDSN builds one), without
// which a transaction losing the race to another process fails with
// SQLITE_BUSY instead of waiting; OpenDB checks both on a file database and
// returns an error naming what is missing. SetMaxOpenConns(1) on db makes
// this process's writers queue in Go rather than on the file lock, at the
// price of reads waiting behind writes.
//
// PostgreSQL: db must be a pgx pool (github.com/jackc/pgx/v5/stdlib): the
// store binds Go slices as PostgreSQL arrays. Its tables go in the first
// schema of the pool's search_path (docs/guides/postgresql.md).
// opts.MaxConns is ignored: the pool is the application's to size.
//
// opts.Driver is required and names the engine (sqlitedriver.OpenDB and
// pgxdriver.OpenDB set it).
func OpenDB(ctx context.Context, db *sql.DB, opts Options) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("sqlstore: OpenDB: nil *sql.DB")
	}
	d := opts.Driver
	if d == nil {
		return nil, checkDriver("OpenDB", d, "")
	}
	if err := d.CheckPool(db); err != nil {
		return nil, fmt.Errorf("sqlstore: OpenDB: %w", err)
	}
	// Retried like Open's (a new SQLite file another instance is switching
	// to WAL answers SQLITE_BUSY at once; Up is idempotent).
	err := retryOpen(ctx, "open", opts, func() error {
		file, err := checkSQLitePool(ctx, d, db)
		if err == nil && opts.Migrate {
			err = migrateDB(ctx, db, d, file, opts.up)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	s := newStore(d.Engine(), opts)
	s.shared = true
	s.write = sqlx.NewDb(db, d.SQLName())
	s.read = s.write
	s.rw = postgresWriter{}
	if s.engine == SQLite {
		w, err := newSQLiteWriter(ctx, db)
		if err != nil {
			return nil, formatError("open (is the database migrated?)", err)
		}
		s.rw = w
	}
	if err := s.withRetry(ctx, "open", func() error { return s.write.PingContext(ctx) }); err != nil {
		s.Close()
		return nil, formatError("open", err)
	}
	return s, nil
}

// migrateDB runs fn with a Migrator on an application's pool, which stays
// open (migrations.NewShared), under the lock every migration of the
// database takes (SQLite: lockSQLite on the pool's file, none in memory,
// where file is ""; PostgreSQL: golang-migrate's advisory lock), so
// instances starting together migrate it once (docs/decisions/0127).
func migrateDB(ctx context.Context, db *sql.DB, d Driver, file string, fn func(*migrations.Migrator) error) (err error) {
	if file != "" {
		release, lockErr := lockSQLite(ctx, file)
		if lockErr != nil {
			return formatError("migrate", lockErr)
		}
		defer func() { release(err) }()
	}
	m, err := migrations.NewShared(ctx, db, d)
	if err != nil {
		return formatError("migrate", err)
	}
	defer m.Close()
	return fn(m)
}

// checkSQLitePool verifies that an application's SQLite pool takes the
// write lock at BEGIN and waits for it: with a transaction open on db it
// tries to take the lock from its own connection without waiting, and
// returns the pool's file. An in-memory database (file ""), or another
// engine, is not checked.
func checkSQLitePool(ctx context.Context, d Driver, db *sql.DB) (file string, err error) {
	if d.Engine() != SQLite {
		return "", nil
	}
	var timeout, seq int64
	var name string
	if err := db.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&timeout); err != nil {
		return "", formatError("open", err)
	}
	if err := db.QueryRowContext(ctx, `PRAGMA database_list`).Scan(&seq, &name, &file); err != nil {
		return "", formatError("open", err)
	}
	if file == "" {
		return "", nil
	}
	const fix = "open it with sqlstore.SQLiteDSN(path)"
	if timeout <= 0 {
		return "", fmt.Errorf("sqlstore: OpenDB: the SQLite pool has no busy_timeout (writers of other processes would fail with SQLITE_BUSY instead of waiting): %s", fix)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return "", formatError("open", err)
	}
	defer tx.Rollback()
	probe, err := sql.Open(d.SQLName(), "file:"+(&url.URL{Path: file}).EscapedPath()+"?_pragma=busy_timeout(0)")
	if err != nil {
		return "", formatError("open", err)
	}
	defer probe.Close()
	probe.SetMaxOpenConns(1) // BEGIN and ROLLBACK on one connection
	_, err = probe.ExecContext(ctx, `BEGIN IMMEDIATE`)
	if err == nil {
		_, _ = probe.ExecContext(ctx, `ROLLBACK`)
		return "", fmt.Errorf("sqlstore: OpenDB: the SQLite pool's transactions do not take the write lock at BEGIN (_txlock=immediate is missing; a transaction that loses a race would fail with SQLITE_BUSY): %s", fix)
	}
	if d.Classify(err)&driverkit.ClassBusy == 0 {
		return "", formatError("open", err)
	}
	return file, nil
}
