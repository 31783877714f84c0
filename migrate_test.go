package balde_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// Migrate is "balde migrate": up applies everything, version changes
// nothing, force records a version (telling what it replaces) without
// running anything, a version that does not exist is refused, and down
// reverts one migration.
func TestMigrate(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := context.Background()
		dsn := sqlstoretest.DSN(t, engine)
		latest, err := migrations.Latest(engine)
		require.NoError(t, err)
		require.Greater(t, latest, uint(1))

		st, err := balde.Migrate(ctx, dsn, balde.MigrateUp, 0, nil)
		require.NoError(t, err)
		require.Equal(t, balde.SchemaState{Engine: engine, Version: latest, Latest: latest}, st)
		require.Equal(t, fmt.Sprintf("%s version %d of %d (current)", engine, latest, latest), st.String())

		st, err = balde.Migrate(ctx, dsn, balde.MigrateVersion, 0, nil)
		require.NoError(t, err)
		require.Equal(t, latest, st.Version)

		st, err = balde.Migrate(ctx, dsn, balde.MigrateForce, int(latest)+1, nil)
		require.ErrorIs(t, err, balde.ErrNoSuchVersion)
		require.Equal(t, latest, st.Latest)

		var from uint
		st, err = balde.Migrate(ctx, dsn, balde.MigrateForce, int(latest)-1, func(v uint, dirty bool) { from = v })
		require.NoError(t, err)
		require.Equal(t, latest, from, "told what it replaces")
		require.Equal(t, latest-1, st.Version)
		require.Equal(t, fmt.Sprintf("%s version %d of %d (1 pending)", engine, latest-1, latest), st.String())

		_, err = balde.Migrate(ctx, dsn, balde.MigrateForce, int(latest), nil)
		require.NoError(t, err)
		st, err = balde.Migrate(ctx, dsn, balde.MigrateDown, 0, nil)
		require.NoError(t, err)
		require.Equal(t, latest-1, st.Version, "one step")

		_, err = balde.Migrate(ctx, dsn, "sideways", 0, nil)
		require.ErrorContains(t, err, `unknown migration action "sideways"`)
		require.Equal(t, "sqlite version 3 of 5 (dirty: the last migration failed half-way; make the schema match a version by hand, then balde migrate force VERSION)",
			balde.SchemaState{Engine: sqlstore.SQLite, Version: 3, Latest: 5, Dirty: true}.String())
	})
}
