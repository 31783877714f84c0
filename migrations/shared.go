package migrations

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/golang-migrate/migrate/v4/database"
)

// NewShared returns a Migrator for an application's own pool: balde's
// migrations run beside the application's tables and its own
// schema_migrations (balde's versions are in VersionTable), and Close leaves
// db open.
//
// On SQLite the migrations run on db itself; open it as
// sqlstore.SQLiteDSN says (_txlock=immediate, a busy_timeout), so that a
// migration takes the write lock at BEGIN. On PostgreSQL db must be a pgx
// pool (github.com/jackc/pgx/v5/stdlib): golang-migrate keeps one
// connection for the whole run (its advisory lock is per session), so the
// Migrator opens one of its own with the configuration of db's connections
// (same server, database, user and search_path) and Close closes it; db's
// connections are never held. A search_path an application sets after
// connecting (SET in an AfterConnect hook) is not seen: put it in the DSN.
func NewShared(ctx context.Context, db *sql.DB, d Driver) (*Migrator, error) {
	if d == nil {
		return New(db, d)
	}
	own, shared, err := d.OwnConn(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("migrations: %s: %w", d.Engine(), err)
	}
	if shared {
		return newMigrator(db, d, true)
	}
	m, err := New(own, d)
	if err != nil {
		own.Close()
		return nil, err
	}
	return m, nil
}

// keepOpen is a golang-migrate driver whose Close leaves the database open
// (SQLite's driver holds nothing else).
type keepOpen struct{ database.Driver }

func (keepOpen) Close() error { return nil }
