// Package pgxdriver is balde's PostgreSQL engine: pgx
// (github.com/jackc/pgx/v5/stdlib, registered with database/sql as "pgx")
// and golang-migrate's driver for it. An application on PostgreSQL imports
// this package, and links no SQLite: a blank import for balde.Open, or its
// Open for a store of its own:
//
//	import _ "github.com/balde-throttle/balde/throttle/sqlstore/pgxdriver"
//	eng, err := balde.Open(ctx, balde.Config{DB: "postgres://...", Migrate: true})
//
//	s, err := pgxdriver.Open(ctx, "postgres://...", sqlstore.Options{Migrate: true})
package pgxdriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/golang-migrate/migrate/v4/database"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/internal/driverkit"
)

// pgDriver is the PostgreSQL sqlstore.Driver; it is a driverkit.Pipeliner
// (decision 0035). The zero value is ready.
type pgDriver struct{}

var (
	_ sqlstore.Driver     = pgDriver{}
	_ driverkit.Pipeliner = pgDriver{}
)

// Importing the package registers the driver (driverkit.Register): a blank
// import chooses PostgreSQL for balde.Open.
func init() { driverkit.Register(pgDriver{}) }

// Engine returns sqlstore.Postgres.
func (pgDriver) Engine() migrations.Engine { return migrations.Postgres }

// SQLName returns "pgx", pgx's name in database/sql.
func (pgDriver) SQLName() string { return "pgx" }

// Instance returns golang-migrate's pgx driver on db.
func (pgDriver) Instance(db *sql.DB, table string) (database.Driver, error) {
	return pgxmigrate.WithInstance(db, &pgxmigrate.Config{MigrationsTable: table})
}

// OwnConn opens a pool of its own with the configuration of db's pgx
// connections, so golang-migrate never holds an application's connection.
func (pgDriver) OwnConn(ctx context.Context, db *sql.DB) (*sql.DB, bool, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, false, err
	}
	defer conn.Close()
	var own *sql.DB
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("the application's *sql.DB is a %T pool, not pgx's (github.com/jackc/pgx/v5/stdlib)", dc)
		}
		own = stdlib.OpenDB(*c.Conn().Config())
		return nil
	})
	return own, false, err // own is nil after an error
}

// CheckPool returns an error unless db is a pgx pool: the store binds Go
// slices as PostgreSQL arrays.
func (pgDriver) CheckPool(db *sql.DB) error {
	if _, ok := db.Driver().(*stdlib.Driver); !ok {
		return fmt.Errorf("PostgreSQL needs a pgx pool (github.com/jackc/pgx/v5/stdlib), not %T", db.Driver())
	}
	return nil
}

// Classify reads PostgreSQL's SQLSTATE (see driverkit.ErrorClass); a
// connection that could not be made, or an error pgx raised before sending
// anything, is transient.
func (pgDriver) Classify(err error) driverkit.ErrorClass {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		code := pe.Code
		c := driverkit.ClassServer
		if slices.Contains([]string{"57P01", "57P02", "57P03", "40001", "40P01", "53300"}, code) || strings.HasPrefix(code, "08") {
			c |= driverkit.ClassTransient
		}
		if slices.Contains([]string{"40001", "40P01", "23505"}, code) {
			c |= driverkit.ClassLostRace
		}
		if code == "55P03" || code == "57014" {
			c |= driverkit.ClassTimeout
		}
		if strings.HasPrefix(code, "57P") || strings.HasPrefix(code, "08") {
			c |= driverkit.ClassBrokenConn
		}
		if strings.HasPrefix(code, "40") && code != "40003" {
			c |= driverkit.ClassCommitFailed
		}
		return c
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.SafeToRetry(err) {
		return driverkit.ClassTransient
	}
	return 0
}

// Open is sqlstore.Open on PostgreSQL (opts.Driver is set).
func Open(ctx context.Context, dsn string, opts sqlstore.Options) (*sqlstore.Store, error) {
	opts.Driver = pgDriver{}
	return sqlstore.Open(ctx, dsn, opts)
}

// OpenDB is sqlstore.OpenDB on an application's pgx pool (opts.Driver is
// set).
func OpenDB(ctx context.Context, db *sql.DB, opts sqlstore.Options) (*sqlstore.Store, error) {
	opts.Driver = pgDriver{}
	return sqlstore.OpenDB(ctx, db, opts)
}
