package sqlstore

import (
	"database/sql"
	"fmt"

	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle/sqlstore/internal/driverkit"
)

// Driver is what differs between the engines below the SQL: the
// database/sql driver, golang-migrate's, the check of an application's pool
// and the meaning of error codes. Only throttle/sqlstore/sqlitedriver and
// pgxdriver implement it; importing one links that engine alone (decision
// 0093) and registers its Driver for DriverOf and balde.Open (decision
// 0129).
type Driver interface {
	migrations.Driver
	// SQLName is the driver's name in database/sql ("sqlite", "pgx").
	SQLName() string
	// CheckPool returns an error saying what is wrong when the store cannot
	// work on an application's pool db (OpenDB). It runs no statement.
	CheckPool(db *sql.DB) error
	// Classify tells what the engine's error err (anywhere in its chain)
	// means, 0 when unrecognised; retries follow it (decision 0020).
	Classify(err error) driverkit.ErrorClass
}

// checkDriver returns the error of a missing driver, or of a driver of
// another engine than the one the DSN or the caller names.
func checkDriver(op string, d Driver, engine Engine) error {
	if d == nil {
		return fmt.Errorf("sqlstore: %s: no Driver: import github.com/balde-throttle/balde/throttle/sqlstore/sqlitedriver "+
			"or .../pgxdriver and use its Open (or set Options.Driver to DriverOf(engine)); alldrivers picks one by the DSN", op)
	}
	if d.Engine() != engine {
		return fmt.Errorf("sqlstore: %s: the database is %s but the Driver is %s's", op, engine, d.Engine())
	}
	return nil
}

// DriverOf returns the Driver registered for engine, or an error naming
// the package to import when none is.
func DriverOf(engine Engine) (Driver, error) {
	if d, ok := driverkit.Registered(engine); ok {
		return d.(Driver), nil
	}
	pkg := map[Engine]string{SQLite: "sqlitedriver", Postgres: "pgxdriver"}[engine]
	if pkg == "" {
		return nil, fmt.Errorf("sqlstore: unknown engine %q (sqlite or postgres)", engine)
	}
	return nil, fmt.Errorf("sqlstore: no driver for %s: import _ \"github.com/balde-throttle/balde/throttle/sqlstore/%s\"", engine, pkg)
}
