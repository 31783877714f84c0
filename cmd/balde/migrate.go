package main

import (
	"context"
	"fmt"

	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// runMigrate is "balde migrate up|down|version [--db DSN]".
func runMigrate(ctx context.Context, m *Main, args []string) error {
	cfg := DefaultConfig()
	if err := cfg.ParseEnv(m.Getenv); err != nil {
		return UsageError("%v", err)
	}
	fs := m.newFlagSet("migrate", "migrate up|down|version [--db DSN]",
		"balde migrate up --db postgres://balde@127.0.0.1:5432/balde")
	cfg.addStoreFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return UsageError("migrate: want exactly one of up, down, version")
	}
	op := fs.Arg(0)
	if op != "up" && op != "down" && op != "version" {
		return UsageError("migrate: unknown action %q (want up, down or version)", op)
	}
	engine, _, err := sqlstore.ParseDSN(cfg.DB)
	if err != nil {
		return UsageError("%v", err)
	}
	return sqlstore.Migrate(ctx, cfg.DB, func(mg *migrations.Migrator) error {
		switch op {
		case "up":
			if err := mg.Up(); err != nil {
				return err
			}
		case "down":
			if err := mg.Down(); err != nil {
				return err
			}
		}
		v, dirty, err := mg.Version()
		if err != nil {
			return err
		}
		latest, err := migrations.Latest(engine)
		if err != nil {
			return err
		}
		state := "current"
		switch {
		case dirty:
			state = "dirty: the last migration failed half-way; fix it and force the version"
		case v < latest:
			state = fmt.Sprintf("%d pending", latest-v)
		}
		fmt.Fprintf(m.Stdout, "%s version %d of %d (%s)\n", engine, v, latest, state)
		return nil
	})
}
