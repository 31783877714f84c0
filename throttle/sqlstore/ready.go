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
// The write changes nothing: it sets the version row of
// balde_schema_migrations to what it is (a real write on both engines: a
// new row version in PostgreSQL, a WAL frame in SQLite).
func (s *Store) CheckWrite(ctx context.Context) error {
	if err := s.CheckIdentity(); err != nil {
		return err
	}
	err := s.writeRoundTrip(ctx)
	if err != nil && transient(err) && ctx.Err() == nil {
		s.flushIdle() // the retry runs on a new connection
		err = s.writeRoundTrip(ctx)
	}
	return formatError("check write", err)
}

func (s *Store) writeRoundTrip(ctx context.Context) error {
	res, err := s.write.ExecContext(ctx, `UPDATE `+migrations.VersionTable+` SET dirty = dirty`)
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
	return nil
}
