package migrations_test

import (
	"context"
	"fmt"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/alldrivers"
	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// TestUpRepairsADirtyVersion leaves the schema dirty the way a balde killed
// between a migration and its version record did (issue 23: "Dirty database
// version 4. Fix and force version."), and checks that Up repairs it when
// the migration verifiably landed or verifiably did not, and refuses, with
// ErrDirty and the missing objects named, when only part of it is there.
func TestUpRepairsADirtyVersion(t *testing.T) {
	for _, tc := range []struct {
		name string
		// prepare gets the database at version 4; it is then marked dirty at 5.
		prepare    func(t *testing.T, exec func(...string), engine sqlstore.Engine, version uint)
		wantErr    string
		wantLanded bool
	}{
		{name: "LandedIsRecordedClean", wantLanded: true, prepare: func(t *testing.T, exec func(...string), engine sqlstore.Engine, version uint) {
			exec(upFile(t, engine, version))
		}},
		{name: "NotLandedRunsAgain", prepare: func(t *testing.T, exec func(...string), engine sqlstore.Engine, version uint) {}},
		{name: "PartlyThereIsRefused", wantErr: "missing: table balde_sifen_settings", prepare: func(t *testing.T, exec func(...string), engine sqlstore.Engine, version uint) {
			exec(`ALTER TABLE balde_documents ADD COLUMN result TEXT`,
				`ALTER TABLE balde_documents ADD COLUMN auth_number TEXT`,
				`CREATE TABLE balde_sifen_rucs (env TEXT)`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
				ctx := context.Background()
				dsn, db := emptyDatabase(t, engine)
				latest, err := migrations.Latest(engine)
				require.NoError(t, err)
				// Dirty at 0005 (append-only: its tables stay what the
				// cases create), from a database at 0004.
				const dirtyAt = 5
				migrateUp(t, dsn)
				for range stepsAbove(t, engine, dirtyAt-1) {
					require.NoError(t, alldrivers.Migrate(ctx, dsn, func(m *migrations.Migrator) error { return m.Down() }))
				}
				run := func(stmts ...string) { exec(t, db, stmts...) }
				tc.prepare(t, run, engine, dirtyAt)
				run(fmt.Sprintf(`UPDATE %s SET version = %d, dirty = true`, migrations.VersionTable, dirtyAt))

				var rep migrations.Repair
				err = alldrivers.Migrate(ctx, dsn, func(m *migrations.Migrator) error {
					rep, err = migrations.RepairOf(ctx, m)
					if err != nil {
						return err
					}
					return m.Up()
				})
				if tc.wantErr != "" {
					require.ErrorIs(t, err, migrations.ErrDirty)
					require.ErrorContains(t, err, tc.wantErr)
					return
				}
				require.NoError(t, err)
				require.Equal(t, uint(dirtyAt), rep.Version)
				require.Equal(t, tc.wantLanded, rep.Landed)
				require.Contains(t, rep.Objects, "table balde_sifen_rucs")
				require.Equal(t, 1, count(t, db, `SELECT count(*) FROM `+migrations.VersionTable+` WHERE dirty = false AND version = `+fmt.Sprint(latest)), "Up went on to the latest")
				s, err := alldrivers.Open(ctx, dsn, sqlstore.Options{})
				require.NoError(t, err)
				require.NoError(t, s.Close())
			})
		})
	}
}

// upFile returns the up migration of version for engine.
func upFile(t *testing.T, engine sqlstore.Engine, version uint) string {
	t.Helper()
	names, err := fs.Glob(migrations.FS, fmt.Sprintf("%s/%04d_*.up.sql", engine, version))
	require.NoError(t, err)
	require.Len(t, names, 1)
	body, err := fs.ReadFile(migrations.FS, names[0])
	require.NoError(t, err)
	return string(body)
}

// TestRepairChecksWhatAMigrationDrops marks 0006 dirty, which adds columns
// and drops balde_sifen_rucs: landed means the columns there and the table
// gone; not landed, the reverse.
func TestRepairChecksWhatAMigrationDrops(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		for _, landed := range []bool{true, false} {
			ctx := context.Background()
			dsn, db := emptyDatabase(t, engine)
			migrateUp(t, dsn)
			for range stepsAbove(t, engine, 6) {
				require.NoError(t, alldrivers.Migrate(ctx, dsn, func(m *migrations.Migrator) error { return m.Down() }))
			}
			if !landed {
				require.NoError(t, alldrivers.Migrate(ctx, dsn, func(m *migrations.Migrator) error { return m.Down() }))
			}
			exec(t, db, `UPDATE `+migrations.VersionTable+` SET version = 6, dirty = true`)
			var rep migrations.Repair
			require.NoError(t, alldrivers.Migrate(ctx, dsn, func(m *migrations.Migrator) (err error) {
				rep, err = migrations.RepairOf(ctx, m)
				return err
			}))
			require.Equal(t, landed, rep.Landed)
			require.Contains(t, rep.Objects, "dropped table balde_sifen_rucs")
			migrateUp(t, dsn)
		}
	})
}
