package migrations_test

import (
	"context"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/alldrivers"
	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// TestEnginesInLockstep checks that both folders hold the same versions,
// each with an up and a down file, and that no SQLite file opens its own
// transaction (the driver wraps each file in one).
func TestEnginesInLockstep(t *testing.T) {
	versions := map[migrations.Engine][]string{}
	name := regexp.MustCompile(`^(\d{4})_[a-z0-9_]+\.(up|down)\.sql$`)
	for _, engine := range []migrations.Engine{migrations.SQLite, migrations.Postgres} {
		entries, err := fs.ReadDir(migrations.FS, string(engine))
		require.NoError(t, err)
		for _, e := range entries {
			m := name.FindStringSubmatch(e.Name())
			require.NotNil(t, m, "%s/%s: want NNNN_name.up.sql or .down.sql", engine, e.Name())
			versions[engine] = append(versions[engine], m[1]+"."+m[2])
			body, err := fs.ReadFile(migrations.FS, string(engine)+"/"+e.Name())
			require.NoError(t, err)
			if engine == migrations.SQLite {
				require.NotRegexp(t, `(?im)^\s*(BEGIN|COMMIT)\b`, string(body), e.Name())
			}
		}
		slices.Sort(versions[engine])
	}
	require.Equal(t, versions[migrations.SQLite], versions[migrations.Postgres])
}

// TestUpDownUp applies every migration, reverts them one by one, and
// applies them again, on each engine.
func TestUpDownUp(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := context.Background()
		var dsn string
		if engine == sqlstore.SQLite {
			dsn = "sqlite://" + t.TempDir() + "/m.db"
		} else {
			dsn = sqlstoretest.PostgresSchema(t)
		}
		latest, err := migrations.Latest(engine)
		require.NoError(t, err)
		version := func() uint {
			var v uint
			require.NoError(t, alldrivers.Migrate(ctx, dsn, func(m *migrations.Migrator) error {
				var dirty bool
				var err error
				v, dirty, err = m.Version()
				require.False(t, dirty)
				return err
			}))
			return v
		}
		up := func(m *migrations.Migrator) error { return m.Up() }
		down := func(m *migrations.Migrator) error { return m.Down() }

		require.NoError(t, alldrivers.Migrate(ctx, dsn, up))
		require.Equal(t, latest, version())
		// Down steps to the previous version in the folder: numbers
		// taken by branches not merged yet leave gaps.
		vs := versionsOf(t, engine)
		for i := len(vs) - 1; i >= 0; i-- {
			require.NoError(t, alldrivers.Migrate(ctx, dsn, down))
			var want uint
			if i > 0 {
				want = vs[i-1]
			}
			require.Equal(t, want, version())
		}
		require.NoError(t, alldrivers.Migrate(ctx, dsn, down), "down at version 0 does nothing")
		require.NoError(t, alldrivers.Migrate(ctx, dsn, up))
		require.Equal(t, latest, version())

		s, err := alldrivers.Open(ctx, dsn, sqlstore.Options{})
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, s.Ping(ctx))
	})
}

// versionsOf lists the versions of engine's migrations, ascending.
func versionsOf(t *testing.T, engine sqlstore.Engine) []uint {
	t.Helper()
	names, err := fs.Glob(migrations.FS, string(engine)+"/*.up.sql")
	require.NoError(t, err)
	var vs []uint
	for _, n := range names {
		v, err := strconv.ParseUint(path.Base(n)[:4], 10, 32)
		require.NoError(t, err)
		vs = append(vs, uint(v))
	}
	slices.Sort(vs)
	return vs
}

// stepsAbove is how many Down steps take engine's latest version to v:
// its migrations numbered above v.
func stepsAbove(t *testing.T, engine sqlstore.Engine, v uint) int {
	t.Helper()
	vs := versionsOf(t, engine)
	return len(vs) - len(slices.DeleteFunc(slices.Clone(vs), func(x uint) bool { return x > v }))
}
