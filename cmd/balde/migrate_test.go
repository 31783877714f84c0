package main

import (
	"bytes"
	"database/sql"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/alldrivers"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// TestConcurrentFirstStartMigratesOnce is issue 13's six processes started
// at once on a new SQLite file, which left the schema dirty in 1 of 3
// trials: with the cross-process lock, every process succeeds and the
// schema ends current and clean, in every trial.
func TestConcurrentFirstStartMigratesOnce(t *testing.T) {
	const trials, processes = 4, 6
	latest, err := migrations.Latest(migrations.SQLite)
	require.NoError(t, err)
	for trial := range trials {
		db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
		type child struct {
			cmd            *exec.Cmd
			stdout, stderr bytes.Buffer
		}
		var children []*child
		for range processes {
			c := &child{cmd: childCommand(t, time.Time{}, "migrate", "--db", db, "up")}
			c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
			children = append(children, c)
		}
		for _, c := range children { // started as close together as possible
			require.NoError(t, c.cmd.Start())
		}
		for i, c := range children {
			err := waitfor.Cmd(t, c.cmd, time.Minute, "trial %d: migrate process %d; stderr:\n%s", trial, i, &c.stderr)
			require.NoError(t, err, "trial %d process %d: %s", trial, i, &c.stderr)
			require.Equal(t, fmt.Sprintf("sqlite version %d of %d (current)\n", latest, latest), c.stdout.String())
		}
	}
}

// TestMigrateForce repairs a dirty schema: force records the version with a
// warning, after which up works again.
func TestMigrateForce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	db := "sqlite://" + path
	code, _, stderr := run(t, nil, "migrate", "--db", db, "up")
	require.Equal(t, ExitOK, code, stderr)
	latest, err := migrations.Latest(migrations.SQLite)
	require.NoError(t, err)

	exec := func(stmts ...string) {
		t.Helper()
		raw, err := sql.Open("sqlite", "file:"+path)
		require.NoError(t, err)
		defer raw.Close()
		for _, s := range stmts {
			_, err = raw.Exec(s)
			require.NoError(t, err, s)
		}
	}
	// A migration that landed whole but was left dirty (killed before
	// its version was recorded, by a balde before decision 0070): up
	// repairs it by itself.
	exec(`UPDATE ` + migrations.VersionTable + ` SET dirty = 1`)
	code, out, _ := run(t, nil, "migrate", "--db", db, "version")
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, "dirty")
	code, _, stderr = run(t, nil, "migrate", "--db", db, "up")
	require.Equal(t, ExitOK, code, "up repairs a dirty version that landed: %s", stderr)

	// A migration that failed half-way (or a schema changed by hand):
	// only part of migration 0005 is there (the database taken back to 5).
	for v := latest; v > 5; v-- {
		code, _, stderr = run(t, nil, "migrate", "--db", db, "down")
		require.Equal(t, ExitOK, code, stderr)
	}
	exec(`DROP TABLE balde_sifen_settings`, `UPDATE `+migrations.VersionTable+` SET dirty = 1`)
	code, _, stderr = run(t, nil, "migrate", "--db", db, "up")
	require.NotEqual(t, ExitOK, code, "up refuses a dirty schema it cannot repair")
	require.Contains(t, stderr, "missing: table balde_sifen_settings")
	// The operator makes the schema match the version by hand.
	exec(`CREATE TABLE balde_sifen_settings (env TEXT NOT NULL PRIMARY KEY CHECK (env IN ('test', 'prod')),
		interval_ns INTEGER NOT NULL, updated_at INTEGER NOT NULL) STRICT, WITHOUT ROWID`)

	code, out, stderr = run(t, nil, "migrate", "--db", db, "force", "5")
	require.Equal(t, ExitOK, code, stderr)
	oneStderrLine(t, stderr, "WARNING: recording version")
	want := fmt.Sprintf("sqlite version 5 of %d (%d pending)\n", latest, latest-5)
	if latest == 5 {
		want = "sqlite version 5 of 5 (current)\n"
	}
	require.Equal(t, want, out)
	code, _, stderr = run(t, nil, "migrate", "--db", db, "up")
	require.Equal(t, ExitOK, code, stderr)
	s, err := alldrivers.Open(t.Context(), db, sqlstore.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	for _, bad := range [][]string{{"force"}, {"force", "x"}, {"force", "-2"}, {"force", "999"}, {"force", "1", "2"}} {
		code, _, stderr := run(t, nil, append([]string{"migrate", "--db", db}, bad...)...)
		require.Equal(t, ExitUsage, code, "%v: %s", bad, stderr)
	}
}

// TestMigrateActions is "balde migrate" on both engines: up applies
// everything, version changes nothing, force records a version (telling
// what it replaces) without running anything, a version that does not
// exist is refused, down reverts one migration, an unknown action is
// refused; each prints the schema's state.
func TestMigrateActions(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		dsn := sqlstoretest.DSN(t, engine)
		latest, err := migrations.Latest(engine)
		require.NoError(t, err)
		require.Greater(t, latest, uint(1))
		migrate := func(args ...string) (int, string, string) {
			return run(t, nil, append([]string{"migrate", "--db", dsn}, args...)...)
		}
		state := func(version uint, state string) string {
			return fmt.Sprintf("%s version %d of %d (%s)\n", engine, version, latest, state)
		}

		code, out, errOut := migrate("up")
		require.Equal(t, ExitOK, code, errOut)
		require.Equal(t, state(latest, "current"), out)
		code, out, errOut = migrate("version")
		require.Equal(t, ExitOK, code, errOut)
		require.Equal(t, state(latest, "current"), out)

		code, _, errOut = migrate("force", fmt.Sprint(latest+1))
		require.Equal(t, ExitUsage, code)
		require.Contains(t, errOut, fmt.Sprintf("version %d does not exist (the latest is %d)", latest+1, latest))

		code, out, errOut = migrate("force", fmt.Sprint(latest-1))
		require.Equal(t, ExitOK, code, errOut)
		require.Contains(t, errOut, fmt.Sprintf("recording version %d as applied (was %d, dirty false)", latest-1, latest), "told what it replaces")
		require.Equal(t, state(latest-1, "1 pending"), out)

		code, _, errOut = migrate("force", fmt.Sprint(latest))
		require.Equal(t, ExitOK, code, errOut)
		code, out, errOut = migrate("down")
		require.Equal(t, ExitOK, code, errOut)
		require.Equal(t, state(latest-1, "1 pending"), out, "one step")

		code, _, errOut = migrate("sideways")
		require.Equal(t, ExitUsage, code)
		require.Contains(t, errOut, `unknown action "sideways"`)
	})
	require.Equal(t, "sqlite version 3 of 5 (dirty: the last migration failed half-way; make the schema match a version by hand, then balde migrate force VERSION)",
		report.SchemaState(sqlstore.SQLite, 3, 5, true))
}
