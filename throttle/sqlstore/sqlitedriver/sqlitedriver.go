// Package sqlitedriver is balde's SQLite engine: modernc.org/sqlite (pure
// Go, registered with database/sql as "sqlite") and golang-migrate's
// driver for it. An application on SQLite imports this package, and links
// no PostgreSQL driver: a blank import for balde.Open, or its Open for a
// store of its own:
//
//	import _ "github.com/balde-throttle/balde/throttle/sqlstore/sqlitedriver"
//	eng, err := balde.Open(ctx, balde.Config{DB: "sqlite://balde.db", Migrate: true})
//
//	s, err := sqlitedriver.Open(ctx, "sqlite://balde.db", sqlstore.Options{Migrate: true})
package sqlitedriver

import (
	"context"
	"database/sql"
	"errors"

	"github.com/golang-migrate/migrate/v4/database"
	sqlitemigrate "github.com/golang-migrate/migrate/v4/database/sqlite"
	"github.com/jmoiron/sqlx"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/internal/driverkit"
)

// sqliteDriver is the SQLite sqlstore.Driver. The zero value is ready.
type sqliteDriver struct{}

var _ sqlstore.Driver = sqliteDriver{}

// Importing the package registers the driver (driverkit.Register): a blank
// import chooses SQLite for balde.Open. sqlx learns that "sqlite" binds "?".
func init() {
	driverkit.Register(sqliteDriver{})
	sqlx.BindDriver("sqlite", sqlx.QUESTION)
}

// Engine returns sqlstore.SQLite.
func (sqliteDriver) Engine() migrations.Engine { return migrations.SQLite }

// SQLName returns "sqlite", modernc.org/sqlite's name in database/sql.
func (sqliteDriver) SQLName() string { return "sqlite" }

// Instance returns golang-migrate's SQLite driver on db.
func (sqliteDriver) Instance(db *sql.DB, table string) (database.Driver, error) {
	return sqlitemigrate.WithInstance(db, &sqlitemigrate.Config{MigrationsTable: table})
}

// OwnConn returns db: SQLite's migrations run on the application's pool
// itself (golang-migrate's SQLite driver holds no connection of its own).
func (sqliteDriver) OwnConn(_ context.Context, db *sql.DB) (*sql.DB, bool, error) {
	return db, true, nil
}

// CheckPool returns nil: what an application's SQLite pool needs
// (_txlock=immediate, a busy_timeout) is checked by sqlstore.OpenDB with
// statements.
func (sqliteDriver) CheckPool(*sql.DB) error { return nil }

// Classify reads SQLite's result code: every *sqlite.Error is the
// database's answer and a COMMIT it fails certainly did not apply;
// SQLITE_BUSY and SQLITE_LOCKED are transient, SQLITE_CORRUPT and
// SQLITE_NOTADB say the file is corrupt.
func (sqliteDriver) Classify(err error) driverkit.ErrorClass {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return 0
	}
	c := driverkit.ClassServer | driverkit.ClassCommitFailed
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY:
		c |= driverkit.ClassTransient | driverkit.ClassBusy
	case sqlite3.SQLITE_LOCKED:
		c |= driverkit.ClassTransient
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		c |= driverkit.ClassCorrupt
	}
	return c
}

// Open is sqlstore.Open on SQLite (opts.Driver is set).
func Open(ctx context.Context, dsn string, opts sqlstore.Options) (*sqlstore.Store, error) {
	opts.Driver = sqliteDriver{}
	return sqlstore.Open(ctx, dsn, opts)
}

// OpenDB is sqlstore.OpenDB on an application's SQLite pool (opts.Driver
// is set); open db with sqlstore.SQLiteDSN.
func OpenDB(ctx context.Context, db *sql.DB, opts sqlstore.Options) (*sqlstore.Store, error) {
	opts.Driver = sqliteDriver{}
	return sqlstore.OpenDB(ctx, db, opts)
}

// Migrate is sqlstore.Migrate on SQLite.
func Migrate(ctx context.Context, dsn string, fn func(*migrations.Migrator) error) error {
	return sqlstore.Migrate(ctx, dsn, sqliteDriver{}, fn)
}
