// Package driverkit holds what sqlstore and its engine driver packages
// (sqlitedriver, pgxdriver) share below sqlstore.Driver: the classes of an
// engine's errors, the pipelined transaction of a Pipeliner and the
// registry of drivers. No application names them.
package driverkit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/balde-throttle/balde/migrations"
)

// ErrorClass is what an engine's error means, as bits.
type ErrorClass uint16

const (
	// ClassServer: the database's own answer (a SQLSTATE, a SQLite result
	// code); the other bits are then the whole verdict.
	ClassServer ErrorClass = 1 << iota
	// ClassTransient: likely to pass by itself, and the statement or
	// transaction did not take effect.
	ClassTransient
	// ClassLostRace: the transaction lost a race to another (serialization
	// failure, deadlock, a unique violation) and may run again at once.
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
	// (55P03, 57014) and did not take effect.
	ClassTimeout
)

// Query is one statement of a Pipeline with its arguments; Scan, when
// set, reads the rows of a Load query.
type Query struct {
	SQL  string
	Args []any
	Scan func(Rows) error
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
	// Load are the queries sent after BEGIN, their rows read in order.
	Load []Query
	// Write, called once the first round trip is read, returns the
	// statements to send before COMMIT; its error rolls back and is
	// returned as is. Nil: COMMIT goes in the first round trip.
	Write func() ([]Query, error)
	// Outcome tells what became of the round trip with COMMIT from the
	// error of the first write that failed (without Write: of BEGIN, a Load
	// query or its Scan), that of COMMIT and that of closing the batch;
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

// An Engined is a driver as Register keeps it: by its engine. sqlstore's
// Driver is one.
type Engined interface {
	Engine() migrations.Engine
}

// registered are the drivers of Register, by engine; written only by
// package initialization, which runs before any read.
var registered = map[migrations.Engine]Engined{}

// Register makes d the sqlstore.Driver of its engine for sqlstore.DriverOf.
// The engine's driver package calls it in its init (and nothing else may),
// so that a blank import chooses the engine an application links:
//
//	import _ "github.com/balde-throttle/balde/throttle/sqlstore/sqlitedriver"
//
// Registering another driver for an engine that has one panics.
func Register(d Engined) {
	if old, ok := registered[d.Engine()]; ok && old != d {
		panic(fmt.Sprintf("sqlstore: Register: a second Driver for %s", d.Engine()))
	}
	registered[d.Engine()] = d
}

// Registered returns the driver Register made the one of engine.
func Registered(engine migrations.Engine) (Engined, bool) {
	d, ok := registered[engine]
	return d, ok
}
