package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"

	"github.com/golang-migrate/migrate/v4/database"
)

// atomicDriver is a golang-migrate driver that applies a migration and
// records its version in one transaction.
//
// golang-migrate records a migration in three steps: it marks the target
// version dirty (one transaction), runs the file (a second), and clears the
// flag (a third). A process killed between the second and the third leaves
// a schema that is complete but dirty, which every later start refused
// (measured: 3 in 40 SQLite first starts killed in their first 50 ms, 2 in
// 39 on PostgreSQL). Both engines have transactional DDL, so here the first
// step only remembers the target version, the second runs the file and
// writes the clean version in the same transaction, and the third finds
// nothing left to do. A kill at any instant leaves either the previous
// version, clean, or the new one, clean. See docs/decisions/0070.
//
// On PostgreSQL the transaction first takes a transaction-level advisory
// lock (runLockClass, the schema) and reads the recorded version again:
// golang-migrate's own lock is a session lock on another connection, which
// the server releases as soon as a killed client's idle lock session ends,
// while the backend running the migration's transaction may still be
// executing or committing it. A second "migrate up" started at once then
// ran the same CREATE TABLE beside it and failed on the unique index of
// pg_type when the first committed. The transaction lock is held by that
// backend until its transaction ends, so the second waits for it; and if
// it committed, the version read under the lock is the target already, so
// the body is not run again.
//
// Force and a migration without a body (golang-migrate calls SetVersion
// clean directly) go to the wrapped driver unchanged.
type atomicDriver struct {
	database.Driver
	db     *sql.DB
	engine Engine
	// target is the version golang-migrate announced (dirty) before Run;
	// recorded says Run wrote it, clean, with the migration, so the
	// SetVersion(target, false) that follows has nothing to do.
	target    int
	hasTarget bool
	recorded  bool
	// beforeCommit, when set (tests), runs before the transaction of Run
	// commits; an error from it rolls the transaction back.
	beforeCommit func(*sql.Tx) error
}

// runLockClass is the first key of the transaction-level advisory lock
// (pg_advisory_xact_lock(int4, int4)) under which a PostgreSQL migration
// runs; the second is hashtext(current_schema()). The two-key form does not
// collide with golang-migrate's one-key session lock.
const runLockClass = 0x62616c64 // "bald"

// SetVersion defers a dirty version to Run, skips the clean version Run
// already recorded, and passes any other call through.
func (d *atomicDriver) SetVersion(version int, dirty bool) error {
	if dirty {
		d.target, d.hasTarget, d.recorded = version, true, false
		return nil
	}
	if d.hasTarget && d.recorded && version == d.target {
		d.hasTarget, d.recorded = false, false
		return nil
	}
	d.hasTarget, d.recorded = false, false
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
	if d.engine == Postgres {
		landed, err := d.lockAndCheck(ctx, tx)
		if err != nil {
			return err
		}
		if landed {
			if err := tx.Commit(); err != nil {
				return &database.Error{OrigErr: err, Err: "transaction commit failed"}
			}
			d.recorded = true
			return nil
		}
	}
	if _, err := tx.ExecContext(ctx, string(body)); err != nil {
		return &database.Error{OrigErr: err, Query: body}
	}
	if err := writeVersion(ctx, tx, d.engine, d.target); err != nil {
		return err
	}
	if d.beforeCommit != nil {
		if err := d.beforeCommit(tx); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return &database.Error{OrigErr: err, Err: "transaction commit failed"}
	}
	d.recorded = true
	return nil
}

// lockAndCheck takes the PostgreSQL migration's transaction lock in tx,
// waiting for any transaction of another migrator of the same schema
// (a killed client's backend still finishing included) to end, then
// reports whether the target version is already recorded, clean: the
// other one applied this migration and committed it.
func (d *atomicDriver) lockAndCheck(ctx context.Context, tx *sql.Tx) (landed bool, err error) {
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1::int4, hashtext(current_schema()))`, runLockClass); err != nil {
		return false, &database.Error{OrigErr: err, Err: "take the migration's transaction lock"}
	}
	// A new statement in READ COMMITTED: it sees what the transaction
	// waited for committed.
	var version int
	var dirty bool
	err = tx.QueryRowContext(ctx, `SELECT version, dirty FROM `+VersionTable+` LIMIT 1`).Scan(&version, &dirty)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, &database.Error{OrigErr: err, Err: "read the schema version under the lock"}
	}
	return version == d.target && !dirty, nil
}

// writeVersion records version (database.NilVersion: none) as the clean
// schema version inside tx, as golang-migrate's drivers do.
func writeVersion(ctx context.Context, tx *sql.Tx, engine Engine, version int) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM `+VersionTable); err != nil {
		return &database.Error{OrigErr: err, Err: "clear the schema version"}
	}
	if version < 0 {
		return nil
	}
	insert := `INSERT INTO ` + VersionTable + ` (version, dirty) VALUES (?, ?)`
	if engine == Postgres {
		insert = `INSERT INTO ` + VersionTable + ` (version, dirty) VALUES ($1, $2)`
	}
	if _, err := tx.ExecContext(ctx, insert, version, false); err != nil {
		return &database.Error{OrigErr: err, Err: fmt.Sprintf("record schema version %d", version)}
	}
	return nil
}
