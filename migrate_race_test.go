package balde_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// envPoolChild tells a re-executed test binary to be one application
// instance opening balde on its own pool: ENGINE DSN.
const envPoolChild = "BALDE_TEST_POOL_CHILD"

// TestPoolChild is the application instance of
// TestInstancesMigrateOnePoolDatabaseAtOnce when envPoolChild is set: it
// opens its own pool on the database and balde on it with Migrate, as an
// application starting does, and exits 0 when both worked.
func TestPoolChild(t *testing.T) {
	spec := os.Getenv(envPoolChild)
	if spec == "" {
		t.Skip("the child process of TestInstancesMigrateOnePoolDatabaseAtOnce")
	}
	var engine sqlstore.Engine
	var dsn string
	_, err := fmt.Sscan(spec, &engine, &dsn)
	require.NoError(t, err)
	driver := "pgx"
	if engine == sqlstore.SQLite {
		driver, dsn = "sqlite", sqlstore.SQLiteDSN(dsn)
	}
	db, err := sql.Open(driver, dsn)
	require.NoError(t, err)
	defer db.Close()
	eng, err := balde.Open(context.Background(), balde.Config{SQLDB: db, Dialect: engine, Migrate: true})
	require.NoError(t, err)
	require.NoError(t, eng.CheckHealth(context.Background()))
	require.NoError(t, eng.Close(context.Background()))
}

// TestInstancesMigrateOnePoolDatabaseAtOnce: two application instances
// (processes) starting together on one new database, each opening balde
// on its own pool with Migrate, both start, every trial: the migration
// takes the same lock as balde's own DSN path, whoever owns the pool
// (docs/decisions/0127). Without it two instances on one SQLite file
// failed with "table balde_policies already exists" or "duplicate column
// name".
func TestInstancesMigrateOnePoolDatabaseAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 40 processes per engine")
	}
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		const trials, instances = 20, 2
		failed := 0
		for trial := range trials {
			dsn := filepath.Join(t.TempDir(), "app.db")
			if engine == sqlstore.Postgres {
				dsn = sqlstoretest.PostgresSchema(t)
			}
			type child struct {
				cmd *exec.Cmd
				out bytes.Buffer
			}
			var children []*child
			for range instances {
				c := &child{cmd: exec.Command(os.Args[0], "-test.run=^TestPoolChild$", "-test.count=1")}
				c.cmd.Env = append(os.Environ(), envPoolChild+"="+string(engine)+" "+dsn)
				c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
				children = append(children, c)
			}
			for _, c := range children { // as close together as possible
				require.NoError(t, c.cmd.Start())
			}
			for i, c := range children {
				if err := waitfor.Cmd(t, c.cmd, time.Minute, "trial %d: instance %d:\n%s", trial, i, &c.out); err != nil {
					failed++
					t.Logf("trial %d: instance %d failed: %v\n%s", trial, i, err, &c.out)
				}
			}
		}
		require.Zero(t, failed, "instances that failed to start, in %d trials of %d", trials, instances)
	})
}
