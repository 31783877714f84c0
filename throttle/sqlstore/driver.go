package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/balde-throttle/balde/migrations"
)

// Driver is what differs between the engines below the SQL: the
// database/sql driver, golang-migrate's driver, the check of an
// application's pool and the meaning of the engine's error codes. This
// package imports no database driver; one package per engine does and
// exports a Driver: throttle/sqlstore/sqlitedriver (modernc.org/sqlite)
// and throttle/sqlstore/pgxdriver (pgx). An application imports the one
// it uses and links only that engine (decision 0093); importing it also
// registers its Driver (Register), as database/sql's drivers register, for
// balde.Open to find by the engine a DSN names (decision 0129).
// internal/alldrivers links both.
type Driver interface {
	migrations.Driver
	// SQLName is the name the driver's package registered with
	// database/sql ("sqlite", "pgx"): importing that package is what
	// makes sql.Open of that name work.
	SQLName() string
	// CheckPool returns an error saying what is wrong when the store
	// cannot work on an application's pool db (OpenDB): PostgreSQL needs
	// pgx's connections, which bind Go slices as arrays. It runs no
	// statement.
	CheckPool(db *sql.DB) error
	// Classify tells what the engine's error err (anywhere in its chain)
	// means; 0 when the driver does not recognise it. It only reads the
	// engine's codes: what is retried is decided here (decision 0020).
	Classify(err error) ErrorClass
}

// ErrorClass is what an engine's error means, as bits.
type ErrorClass uint16

const (
	// ClassServer: the error is the database's own answer (PostgreSQL's
	// SQLSTATE, a SQLite result code). The other bits are then the whole
	// verdict: the engine-neutral checks (lost connections, io.EOF,
	// golang-migrate's texts) do not apply.
	ClassServer ErrorClass = 1 << iota
	// ClassTransient: likely to pass by itself, and the statement or
	// transaction did not take effect (a session terminated by a
	// restarting server, a connection that could not be made,
	// SQLITE_BUSY past its busy timeout).
	ClassTransient
	// ClassLostRace: the transaction lost a race to another and may run
	// again at once (serialization failure, deadlock, the unique
	// violation of two transactions inserting the same new bucket).
	ClassLostRace
	// ClassBrokenConn: the connection itself is gone, and the pool's idle
	// ones likely too.
	ClassBrokenConn
	// ClassCommitFailed: a failed COMMIT that certainly did not apply.
	ClassCommitFailed
	// ClassBusy: SQLite's SQLITE_BUSY, extended codes included.
	ClassBusy
	// ClassCorrupt: SQLite's SQLITE_CORRUPT or SQLITE_NOTADB.
	ClassCorrupt
	// ClassTimeout: the statement waited past a bound of the session
	// (PostgreSQL's lock_timeout, 55P03, or a cancelled statement, 57014)
	// and did not take effect; running it again would wait the same way.
	ClassTimeout
)

// Query is one statement of a Pipeline with its arguments.
type Query struct {
	SQL  string
	Args []any
}

// Rows are the rows of one Load query of a Pipeline.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// Pipeline is one transaction a Pipeliner runs in two round trips: BEGIN
// and Load in the first; Write's statements and COMMIT in the second. A
// Pipeline without Write is one round trip: BEGIN, Load and COMMIT in one
// batch (the optimistic write of optimistic.go).
type Pipeline struct {
	// Load are the queries sent after BEGIN.
	Load []Query
	// Scan reads the rows of Load[i], in order.
	Scan func(i int, rows Rows) error
	// Write is called once the first round trip is read; it returns the
	// statements to send before COMMIT (none: COMMIT alone). Its error
	// ends the transaction, rolled back, and is returned as is. Nil: COMMIT
	// is queued behind Load in the first round trip, and Load's statements
	// are the transaction's writes.
	Write func() ([]Query, error)
	// Outcome tells what became of the round trip with COMMIT from the
	// error of the first write statement that failed (without Write: of
	// BEGIN or the first Load query, or of its Scan), that of COMMIT (nil
	// when a write failed) and that of reading the end of the batch;
	// Pipeline returns what it returns.
	Outcome func(writeErr, commitErr, closeErr error) error
}

// Pipeliner is implemented by a Driver that can run a Pipeline on its own
// connections (pgx: decision 0035). Update uses it on PostgreSQL.
type Pipeliner interface {
	// Pipeline runs p on conn. It returns ErrNoPipeline, having done
	// nothing, when conn's driver connection is not the driver's. After
	// an error it leaves conn outside a transaction, or discarded.
	Pipeline(ctx context.Context, conn *sql.Conn, p *Pipeline) error
}

// ErrNoPipeline says a Pipeliner cannot run on a connection: Update then
// takes the database/sql path.
var ErrNoPipeline = errors.New("sqlstore: connection cannot pipeline")

// checkDriver returns the error of a missing driver, or of a driver of
// another engine than the one the DSN or the caller names.
func checkDriver(op string, d Driver, engine Engine) error {
	if d == nil {
		return fmt.Errorf("sqlstore: %s: no Driver: import github.com/balde-throttle/balde/throttle/sqlstore/sqlitedriver "+
			"or .../pgxdriver and use its Open (or set Options.Driver to its Driver{}); alldrivers picks one by the DSN", op)
	}
	if d.Engine() != engine {
		return fmt.Errorf("sqlstore: %s: the database is %s but the Driver is %s's", op, engine, d.Engine())
	}
	return nil
}

// registered are the Drivers of Register, by engine.
var (
	registeredMu sync.RWMutex
	registered   = map[Engine]Driver{}
)

// Register makes d the Driver of its engine for DriverOf. The engine's
// driver package calls it in its init, so that a blank import chooses the
// engine an application links:
//
//	import _ "github.com/balde-throttle/balde/throttle/sqlstore/sqlitedriver"
//
// Registering another Driver for an engine that has one panics.
func Register(d Driver) {
	registeredMu.Lock()
	defer registeredMu.Unlock()
	if old, ok := registered[d.Engine()]; ok && old != d {
		panic(fmt.Sprintf("sqlstore: Register: a second Driver for %s", d.Engine()))
	}
	registered[d.Engine()] = d
}

// DriverOf returns the Driver registered for engine, or an error naming
// the package to import when none is.
func DriverOf(engine Engine) (Driver, error) {
	registeredMu.RLock()
	d, ok := registered[engine]
	registeredMu.RUnlock()
	if ok {
		return d, nil
	}
	pkg := map[Engine]string{SQLite: "sqlitedriver", Postgres: "pgxdriver"}[engine]
	if pkg == "" {
		return nil, fmt.Errorf("sqlstore: unknown engine %q (sqlite or postgres)", engine)
	}
	return nil, fmt.Errorf("sqlstore: no driver for %s: import _ \"github.com/balde-throttle/balde/throttle/sqlstore/%s\"", engine, pkg)
}
