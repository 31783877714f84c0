package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/balde-throttle/balde/throttle/sqlstore"
)

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
