package migrations

import (
	"context"
	"database/sql"
	"fmt"
	"io"

	"github.com/golang-migrate/migrate/v4/database"
)

// atomicDriver is a golang-migrate driver that applies a migration and
// records its version clean in one transaction, so that a kill at any
// instant leaves the previous version or the new one, never a dirty one
// (docs/decisions/0070): SetVersion(v, true) only remembers the target, Run
// runs the file and writes the version, and the SetVersion(v, false) that
// follows has nothing left to do. On PostgreSQL Run first takes a
// transaction-level advisory lock and skips a body another migrator already
// committed (lockAndCheck). Force and a migration without a body go to the
// wrapped driver unchanged.
type atomicDriver struct {
	database.Driver
	db     *sql.DB
	engine Engine
	// target is the version announced (dirty) before Run; recorded says
	// Run wrote it clean.
	target    int
	hasTarget bool
	recorded  bool
	// beforeCommit, when set (tests), runs before the transaction of Run
	// commits; an error from it rolls the transaction back.
	beforeCommit func(*sql.Tx) error
}

// runLockClass is the first key of a PostgreSQL migration's
// pg_advisory_xact_lock(int4, int4), the second hashtext(current_schema()):
// the two-key form does not collide with golang-migrate's session lock.
const runLockClass = 0x62616c64 // "bald"

// SetVersion defers a dirty version to Run, skips the clean version Run
// already recorded, and passes any other call through.
func (d *atomicDriver) SetVersion(version int, dirty bool) error {
	if dirty {
		d.target, d.hasTarget, d.recorded = version, true, false
		return nil
	}
	done := d.hasTarget && d.recorded && version == d.target
	d.hasTarget, d.recorded = false, false
	if done {
		return nil
	}
	return d.Driver.SetVersion(version, dirty)
}

// Run applies the migration body and records the announced version as
// clean, in one transaction.
func (d *atomicDriver) Run(migration io.Reader) error {
	if !d.hasTarget {
		return d.Driver.Run(migration) // not announced: golang-migrate's own way
	}
	body, err := io.ReadAll(migration)
	if err != nil {
		return err
	}
	ctx := context.Background()
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return &database.Error{OrigErr: err, Err: "transaction start failed"}
	}
	defer tx.Rollback()
	landed := false
	if d.engine == Postgres {
		if landed, err = d.lockAndCheck(ctx, tx); err != nil {
			return err
		}
	}
	if !landed {
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			return &database.Error{OrigErr: err, Query: body}
		}
		if err := writeVersion(ctx, tx, d.target); err != nil {
			return err
		}
		if d.beforeCommit != nil {
			if err := d.beforeCommit(tx); err != nil {
				return err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return &database.Error{OrigErr: err, Err: "transaction commit failed"}
	}
	d.recorded = true
	return nil
}

// lockAndCheck takes the PostgreSQL migration's transaction lock in tx,
// which waits for another migrator's transaction on the schema to end (a
// killed client's backend may still be committing it: golang-migrate's
// session lock is already released), then reports whether that one
// recorded the target version clean.
func (d *atomicDriver) lockAndCheck(ctx context.Context, tx *sql.Tx) (landed bool, err error) {
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1::int4, hashtext(current_schema()))`, runLockClass); err != nil {
		return false, &database.Error{OrigErr: err, Err: "take the migration's transaction lock"}
	}
	// A new statement in READ COMMITTED sees what the lock waited for.
	version, dirty, err := ReadVersion(ctx, tx, VersionTable)
	if err != nil {
		return false, &database.Error{OrigErr: err, Err: "read the schema version under the lock"}
	}
	return int(version) == d.target && !dirty, nil
}

// writeVersion records version (database.NilVersion: none) as the clean
// schema version inside tx, as golang-migrate's drivers do.
func writeVersion(ctx context.Context, tx *sql.Tx, version int) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM `+VersionTable); err != nil {
		return &database.Error{OrigErr: err, Err: "clear the schema version"}
	}
	if version < 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+VersionTable+` (version, dirty) VALUES ($1, $2)`, version, false); err != nil {
		return &database.Error{OrigErr: err, Err: fmt.Sprintf("record schema version %d", version)}
	}
	return nil
}
