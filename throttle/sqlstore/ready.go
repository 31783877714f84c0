package sqlstore

import (
	"context"
	"fmt"

	"github.com/balde-throttle/balde/migrations"
)

// CheckWrite is a write round trip: the store writes to the database and
// commits, through the connection its decisions are written by. It fails
// when the database answers reads but refuses writes (a read-only or
// immutable file, a read-only PostgreSQL session or replica, a full disk),
// and when the SQLite file was deleted or replaced (CheckIdentity). After a
// failure on a connection that may be stale it tries once more on a fresh
// one, so a single reset of the pool's connections does not fail it.
// Bound it with ctx: a probe wants its answer quickly.
//
// On SQLite it also fails, with ErrDatabaseCorrupt, once the file was found
// corrupt (see CheckIntegrity; CheckWrite starts the check in the
// background when the last one is older than Options.IntegrityEvery).
//
// The write changes nothing in the end: in one transaction it flips the
// dirty flag of balde_schema_migrations and flips it back, so SQLite has a
// dirty page to append to the WAL (setting a column to its value writes
// nothing) and PostgreSQL a new row version. Readers never see it.
func (s *Store) CheckWrite(ctx context.Context) error {
	if err := s.CheckIdentity(); err != nil {
		return err
	}
	if err := s.corruptErr(); err != nil {
		return formatError("check write", err)
	}
	s.integrityDue()
	err := s.noteCorrupt(s.writeRoundTrip(ctx))
	if err != nil && transient(s.driver, err) && ctx.Err() == nil {
		s.flushIdle() // the retry runs on a new connection
		err = s.writeRoundTrip(ctx)
	}
	return formatError("check write", err)
}

func (s *Store) writeRoundTrip(ctx context.Context) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for range 2 {
		res, err := tx.ExecContext(ctx, `UPDATE `+migrations.VersionTable+` SET dirty = NOT dirty`)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("%s has %d rows, want 1 (is the database migrated?)", migrations.VersionTable, n)
		}
	}
	return tx.Commit()
}
