package migrations

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/golang-migrate/migrate/v4/database"
)

// NewShared returns a Migrator for an application's own pool, beside its
// tables and its schema_migrations; Close leaves db open. On SQLite the
// migrations run on db, opened as sqlstore.SQLiteDSN says (_txlock=immediate,
// a busy_timeout). On PostgreSQL db must be a pgx pool: the Migrator opens a
// connection of its own with db's configuration (server, database, user,
// search_path) and Close closes it; a search_path set after connecting (an
// AfterConnect hook) is not seen: put it in the DSN.
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
