package main

import (
	"context"
	"strconv"

	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// runMigrate is "balde migrate up|down|version [--db DSN]" and
// "balde migrate force VERSION [--db DSN]".
//
// force records VERSION as applied and clears the dirty flag without
// running anything: the manual repair after a migration failed half-way,
// once the schema has been made to match VERSION by hand. It prints a
// warning on stderr, since forcing a version the schema does not match
// makes every later migration run against the wrong schema.
func runMigrate(ctx context.Context, m *Main, args []string) error {
	cfg, fs, parse := m.newCommand("migrate", "migrate up|down|version|force VERSION [--db DSN]",
		"balde migrate up --db postgres://balde@127.0.0.1:5432/balde", storeFlags)
	if err := parse(args); err != nil {
		return err
	}
	op := fs.Arg(0)
	force := -2 // the version to force; -1 is "no migration applied"
	switch {
	case op == "force" && fs.NArg() == 2:
		v, err := strconv.Atoi(fs.Arg(1))
		if err != nil || v < -1 {
			return UsageError("migrate: force: %q is not a version (a migration number, or -1 for none)", fs.Arg(1))
		}
		force = v
	case op == "force":
		return UsageError("migrate: force needs exactly one VERSION")
	case fs.NArg() != 1:
		fs.SetOutput(m.Stderr) // the usage with an error
		fs.Usage()
		return UsageError("migrate: want exactly one of up, down, version, force VERSION")
	case op != "up" && op != "down" && op != "version":
		return UsageError("migrate: unknown action %q (want up, down, version or force VERSION)", op)
	}
	engine, _, err := sqlstore.ParseDSN(cfg.DB)
	if err != nil {
		return UsageError("%v", err)
	}
	if op != "up" {
		// Only up builds a database where there is none: reading or
		// fixing the version of a path that has no file must not leave
		// an empty database behind.
		if err := requireDatabase(cfg.DB); err != nil {
			return err
		}
	}
	latest, err := migrations.Latest(engine)
	if err != nil {
		return err
	}
	if op == "force" && force > int(latest) {
		return UsageError("migrate: force: version %d does not exist (the latest is %d)", force, latest)
	}
	return report.Migrate(ctx, m.Stdout, m.Stderr, cfg.DB, engine, latest, op, force)
}
