package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// checkCreate refuses to let serve create a new SQLite database where one
// is expected: a missing file at a configured path usually means the
// database was deleted or moved, and creating an empty one in its place
// would silently reset every bucket and the ledger. A new file is created
// only with --create, or at the default path (sqlstore.DefaultDSN, the
// first run of "make run"). PostgreSQL databases are never created by
// balde: nothing to check. creating tells the caller to say, once serve is
// up, that the database is new.
func checkCreate(dsn string, create bool) (creating bool, err error) {
	engine, driverDSN, err := sqlstore.ParseDSN(dsn)
	if err != nil || engine != sqlstore.SQLite {
		return false, nil // a bad DSN is reported where the store is opened
	}
	path := sqlstore.SQLitePath(driverDSN)
	_, err = os.Stat(path)
	switch {
	case err == nil:
		return false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("serve: database %s: %w", path, err)
	case create || dsn == sqlstore.DefaultDSN:
		return true, nil
	}
	return false, UsageError("serve: no database at %s; pass --create to create a new, empty one (was it deleted or moved?)", path)
}

// logDatabase says which database serve opened, and loudly when it is new.
func logDatabase(store *sqlstore.Store, created bool, logger *slog.Logger) {
	if created {
		logger.Warn("created a new, empty database", slog.String("identity", store.Identity().String()))
		return
	}
	logger.Info("database opened", slog.String("identity", store.Identity().String()))
}

// checkWritable makes serve refuse to start on a database it cannot write
// (a read-only or immutable file, a read-only PostgreSQL session).
func checkWritable(ctx context.Context, store *sqlstore.Store) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := store.CheckWrite(ctx); err != nil {
		return fmt.Errorf("serve: the database cannot be written, refusing to start: %w", err)
	}
	return nil
}
