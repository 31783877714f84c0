// Package migrations holds balde's schema as golang-migrate files, one folder
// per engine (sqlite/, postgres/), embedded in the binary. Version numbers are
// kept in lockstep: 0003 means the same change in both folders. Files are
// append-only; a SQLite file never contains BEGIN/COMMIT (the driver wraps
// each file in a transaction).
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	"github.com/golang-migrate/migrate/v4/source/iofs"
)

//go:embed sqlite/*.sql postgres/*.sql
var sqlFiles embed.FS

// Engine names a folder of migrations: "sqlite" or "postgres".
type Engine string

const (
	SQLite   Engine = "sqlite"
	Postgres Engine = "postgres"
)

// VersionTable is where golang-migrate records balde's schema version; not
// its default schema_migrations, which an application sharing the database
// may keep for its own history.
const VersionTable = "balde_schema_migrations"

// ReadVersion reads the version and dirty flag recorded in table
// (VersionTable, or an old balde's schema_migrations) through q, a pool or
// a transaction; 0 and clean when no version is recorded.
func ReadVersion(ctx context.Context, q queryer, table string) (version int64, dirty bool, err error) {
	err = q.QueryRowContext(ctx, `SELECT version, dirty FROM `+table+` LIMIT 1`).Scan(&version, &dirty)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return version, dirty, err
}

// Migrator applies the migrations of one engine to one database. It owns the
// *sql.DB it was given and closes it in Close (golang-migrate's drivers do).
type Migrator struct {
	m      *migrate.Migrate
	db     *sql.DB
	engine Engine
	atomic *atomicDriver
	// Logger receives the automatic repairs of Up; nil discards them.
	Logger *slog.Logger
}

// Driver is what differs between the engines for migrations. This package
// imports no database driver: each engine's package implements Driver
// (throttle/sqlstore/sqlitedriver, pgxdriver), so an application links only
// the engine it chose.
type Driver interface {
	// Engine names the folder of migrations: SQLite or Postgres.
	Engine() Engine
	// Instance returns golang-migrate's driver on db, recording versions in
	// table. Closing it closes db.
	Instance(db *sql.DB, table string) (database.Driver, error)
	// OwnConn returns the handle the migrations of an application's pool
	// db run on (NewShared): db itself with shared true, or a pool of its
	// own with the configuration of db's connections, which Close closes.
	OwnConn(ctx context.Context, db *sql.DB) (own *sql.DB, shared bool, err error)
}

// New returns a Migrator over db, a dedicated handle that Close closes; d is
// the engine's driver (sqlstore.DriverOf).
func New(db *sql.DB, d Driver) (*Migrator, error) {
	if d == nil {
		return nil, errors.New("migrations: nil Driver: import throttle/sqlstore/sqlitedriver or throttle/sqlstore/pgxdriver and pass sqlstore.DriverOf(engine)")
	}
	return newMigrator(db, d, false)
}

// NewShared returns a Migrator for an application's own pool, beside its
// tables and its schema_migrations; Close leaves db open. On SQLite the
// migrations run on db, opened as sqlstore.SQLiteDSN says (_txlock=immediate,
// a busy_timeout). On PostgreSQL db must be a pgx pool: the Migrator opens a
// connection of its own with db's configuration (server, database, user,
// search_path) and Close closes it; a search_path set after connecting (an
// AfterConnect hook) is not seen: put it in the DSN.
func NewShared(ctx context.Context, db *sql.DB, d Driver) (*Migrator, error) {
	if d == nil {
		return New(db, d)
	}
	own, shared, err := d.OwnConn(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("migrations: %s: %w", d.Engine(), err)
	}
	if shared {
		return newMigrator(db, d, true)
	}
	m, err := New(own, d)
	if err != nil {
		own.Close()
		return nil, err
	}
	return m, nil
}

// keepOpen is a golang-migrate driver whose Close leaves the database open
// (SQLite's driver holds nothing else).
type keepOpen struct{ database.Driver }

func (keepOpen) Close() error { return nil }

// newMigrator is New; a shared db is left open by Close.
func newMigrator(db *sql.DB, d Driver, shared bool) (*Migrator, error) {
	engine := d.Engine()
	if engine != SQLite && engine != Postgres {
		return nil, fmt.Errorf("migrations: unknown engine %q", engine)
	}
	src, err := iofs.New(sqlFiles, string(engine))
	if err != nil {
		return nil, fmt.Errorf("migrations: %s: %w", engine, err)
	}
	if err := adoptLegacy(db, engine); err != nil {
		return nil, fmt.Errorf("migrations: %s: %w", engine, err)
	}
	drv, err := d.Instance(db, VersionTable)
	if err != nil {
		return nil, fmt.Errorf("migrations: %s: %w", engine, err)
	}
	atomic := &atomicDriver{Driver: drv, db: db, engine: engine}
	drv = atomic
	if shared {
		drv = keepOpen{drv}
	}
	m, err := migrate.NewWithInstance("iofs", src, string(engine), drv)
	if err != nil {
		return nil, fmt.Errorf("migrations: %s: %w", engine, err)
	}
	return &Migrator{m: m, db: db, engine: engine, atomic: atomic}, nil
}

// Up applies every pending migration, each in one transaction with its
// version; none pending is not an error. A dirty schema is first repaired
// when its migration verifiably landed or did not (Migrator.repair), else Up
// returns an error wrapping ErrDirty that says what to do.
func (g *Migrator) Up() error {
	if _, err := g.repair(context.Background()); err != nil {
		return err
	}
	if err := g.m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrations: up: %w", err)
	}
	return nil
}

// Down reverts the latest migration only (one step), the safe default for an
// operator. Having none to revert is not an error.
func (g *Migrator) Down() error {
	if v, _, err := g.Version(); err != nil || v == 0 {
		return err
	}
	if err := g.m.Steps(-1); err != nil {
		return fmt.Errorf("migrations: down: %w", err)
	}
	return nil
}

// Force records version (-1: none) as applied and clean, running no
// migration: the manual repair once the operator made the schema match
// version by hand. On a schema that does not match, every later migration
// runs against the wrong one.
func (g *Migrator) Force(version int) error {
	if err := g.m.Force(version); err != nil {
		return fmt.Errorf("migrations: force %d: %w", version, err)
	}
	return nil
}

// Version returns the applied version (0 when none) and whether the last
// migration failed half-way (dirty).
func (g *Migrator) Version() (version uint, dirty bool, err error) {
	v, dirty, err := g.m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("migrations: version: %w", err)
	}
	return v, dirty, nil
}

// Latest returns the highest version in the engine's folder: the version a
// database is at when it is current.
func Latest(engine Engine) (uint, error) {
	src, err := iofs.New(sqlFiles, string(engine))
	var v uint
	if err == nil {
		v, err = src.First()
	}
	for next := v; err == nil; next, err = src.Next(v) {
		v = next
	}
	if v == 0 || !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("migrations: %s: %w", engine, err)
	}
	return v, nil
}

// Close closes the migrator and its database handle.
func (g *Migrator) Close() error {
	srcErr, dbErr := g.m.Close()
	return errors.Join(srcErr, dbErr)
}
