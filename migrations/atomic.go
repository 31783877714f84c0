package migrations

import (
	"context"
	"database/sql"
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
// (issue 23: 3 in 40 SQLite first starts killed in their first 50 ms, 2 in
// 39 on PostgreSQL). Both engines have transactional DDL, so here the first
// step only remembers the target version, the second runs the file and
// writes the clean version in the same transaction, and the third finds
// nothing left to do. A kill at any instant leaves either the previous
// version, clean, or the new one, clean. See docs/decisions/0070.
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
}

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
	if _, err := tx.ExecContext(ctx, string(body)); err != nil {
		return &database.Error{OrigErr: err, Query: body}
	}
	if err := writeVersion(ctx, tx, d.engine, d.target); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return &database.Error{OrigErr: err, Err: "transaction commit failed"}
	}
	d.recorded = true
	return nil
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
