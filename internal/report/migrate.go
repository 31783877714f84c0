package report

import (
	"context"
	"fmt"
	"io"

	"github.com/balde-throttle/balde/internal/alldrivers"
	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// Migrate runs "balde migrate" op (up, down, version, or force to version
// force, with a warning to warn) on dsn, a database of engine whose latest
// migration is latest, and prints SchemaState to w.
func Migrate(ctx context.Context, w, warn io.Writer, dsn string, engine sqlstore.Engine, latest uint, op string, force int) error {
	var version uint
	var dirty bool
	err := alldrivers.Migrate(ctx, dsn, func(mg *migrations.Migrator) (err error) {
		switch op {
		case "up":
			err = mg.Up()
		case "down":
			err = mg.Down()
		case "force":
			if version, dirty, err = mg.Version(); err == nil {
				fmt.Fprintf(warn, "balde: WARNING: recording version %d as applied (was %d, dirty %t) without running any migration; "+
					"the schema must already match it, or later migrations will fail or damage data\n", force, version, dirty)
				err = mg.Force(force)
			}
		}
		if err != nil {
			return err
		}
		version, dirty, err = mg.Version()
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(w, SchemaState(engine, version, latest, dirty))
	return nil
}

// SchemaState is "sqlite version 3 of 5 (2 pending)", "… (current)", or
// the dirty state with what to do.
func SchemaState(engine sqlstore.Engine, version, latest uint, dirty bool) string {
	state := "current"
	switch {
	case dirty:
		state = "dirty: the last migration failed half-way; make the schema match a version by hand, then balde migrate force VERSION"
	case version < latest:
		state = fmt.Sprintf("%d pending", latest-version)
	}
	return fmt.Sprintf("%s version %d of %d (%s)", engine, version, latest, state)
}
