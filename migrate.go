package balde

import (
	"context"
	"errors"
	"fmt"

	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/alldrivers"
)

// Migration actions of Migrate ("balde migrate up|down|version|force").
const (
	MigrateUp      = "up"      // apply every pending migration
	MigrateDown    = "down"    // revert the latest migration only (one step)
	MigrateVersion = "version" // change nothing, say the version
	MigrateForce   = "force"   // record a version as applied, running nothing
)

// ErrNoSuchVersion is Migrate's error for a forced version that is not a
// migration of balde's (nor -1, none).
var ErrNoSuchVersion = errors.New("no such migration version")

// SchemaState is a database's schema version after Migrate.
type SchemaState struct {
	Engine  sqlstore.Engine
	Version uint // the last migration applied
	Latest  uint // balde's last migration
	// Dirty is a migration that failed half-way: the schema must be made
	// to match a version by hand, then that version forced.
	Dirty bool
}

// String is "sqlite version 3 of 5 (2 pending)", "… (current)", or the
// dirty state with what to do about it.
func (s SchemaState) String() string {
	state := "current"
	switch {
	case s.Dirty:
		state = "dirty: the last migration failed half-way; make the schema match a version by hand, then balde migrate force VERSION"
	case s.Version < s.Latest:
		state = fmt.Sprintf("%d pending", s.Latest-s.Version)
	}
	return fmt.Sprintf("%s version %d of %d (%s)", s.Engine, s.Version, s.Latest, state)
}

// Migrate runs action (MigrateUp, MigrateDown, MigrateVersion or
// MigrateForce) on the database of dsn, holding the migration lock, and
// returns the schema's state afterwards. force is the version MigrateForce
// records as applied (-1: none) once the schema has been made to match it
// by hand; before it does, forcing(from, dirty) is called with the
// version it replaces (nil: not called), for a warning: forcing a version
// the schema does not match makes every later migration run against the
// wrong schema. Only MigrateUp creates a database where there is none; use
// CheckDatabase first to refuse a missing SQLite file. Errors: a DSN
// sqlstore.ParseDSN refuses, ErrNoSuchVersion or an unknown action (the
// state then has the engine and the latest version only), or the
// migration's own.
func Migrate(ctx context.Context, dsn, action string, force int, forcing func(from uint, dirty bool)) (SchemaState, error) {
	engine, _, err := sqlstore.ParseDSN(dsn)
	if err != nil {
		return SchemaState{}, err
	}
	latest, err := migrations.Latest(engine)
	if err != nil {
		return SchemaState{}, err
	}
	st := SchemaState{Engine: engine, Latest: latest}
	switch action {
	case MigrateUp, MigrateDown, MigrateVersion:
	case MigrateForce:
		if force < -1 || force > int(latest) {
			return st, fmt.Errorf("%w: %d (the latest is %d)", ErrNoSuchVersion, force, latest)
		}
	default:
		return st, fmt.Errorf("balde: unknown migration action %q", action)
	}
	err = alldrivers.Migrate(ctx, dsn, func(mg *migrations.Migrator) error {
		var err error
		switch action {
		case MigrateUp:
			err = mg.Up()
		case MigrateDown:
			err = mg.Down()
		case MigrateForce:
			err = forceVersion(mg, force, forcing)
		}
		if err != nil {
			return err
		}
		st.Version, st.Dirty, err = mg.Version()
		return err
	})
	return st, err
}

// forceVersion records version as applied, after telling forcing what it
// replaces.
func forceVersion(mg *migrations.Migrator, version int, forcing func(from uint, dirty bool)) error {
	v, dirty, err := mg.Version()
	if err != nil {
		return err
	}
	if forcing != nil {
		forcing(v, dirty)
	}
	return mg.Force(version)
}
