// Package alldrivers chooses balde's engine from a DSN, and so links
// both: SQLite (sqlitedriver) and PostgreSQL (pgxdriver). It is for
// programs that take either engine at run time, like cmd/balde; an
// application on one engine imports that engine's package instead and
// links only it (for balde.Open, a blank import registers it).
package alldrivers

import (
	"context"

	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	_ "github.com/balde-throttle/balde/throttle/sqlstore/pgxdriver"
	_ "github.com/balde-throttle/balde/throttle/sqlstore/sqlitedriver"
)

// forDSN returns the Driver of the engine dsn names (see sqlstore.ParseDSN);
// both are registered by the imports.
func forDSN(dsn string) (sqlstore.Driver, error) {
	engine, _, err := sqlstore.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	return sqlstore.DriverOf(engine)
}

// Open is sqlstore.Open with the Driver of the engine dsn names.
func Open(ctx context.Context, dsn string, opts sqlstore.Options) (*sqlstore.Store, error) {
	d, err := forDSN(dsn)
	if err != nil {
		return nil, err
	}
	opts.Driver = d
	return sqlstore.Open(ctx, dsn, opts)
}

// Migrate is sqlstore.Migrate with the Driver of the engine dsn names.
func Migrate(ctx context.Context, dsn string, fn func(*migrations.Migrator) error) error {
	d, err := forDSN(dsn)
	if err != nil {
		return err
	}
	return sqlstore.Migrate(ctx, dsn, d, fn)
}
