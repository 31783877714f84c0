package sqlstore_test

import (
	"cmp"
	"context"
	"database/sql"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/internal/driverkit"
	_ "github.com/balde-throttle/balde/throttle/sqlstore/pgxdriver"
	_ "github.com/balde-throttle/balde/throttle/sqlstore/sqlitedriver" // the application's own pool
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// TestOneEngineLinksOneDriver: an application links only the driver of the
// engine it chose (decisions 0093, 0129). The engine-neutral packages,
// balde's root package among them, link neither driver; each driver
// package and a program on its engine alone link only their own: one on
// the store (testdata/sqliteonly, testdata/postgresonly) and one on
// balde.Open with the engine's blank import (testdata/baldesqlite,
// testdata/baldepostgres; balde.Open linked both drivers before).
func TestOneEngineLinksOneDriver(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("SKIPPED: the go command is not on PATH; cannot list the packages' dependencies")
	}
	const (
		mod          = "github.com/balde-throttle/balde/"
		pgx          = "github.com/jackc/pgx"
		sqlite       = "modernc.org/sqlite"
		migratePgx   = "github.com/golang-migrate/migrate/v4/database/pgx"
		migrateSQLit = "github.com/golang-migrate/migrate/v4/database/sqlite"
	)
	neither := []string{pgx, sqlite, migratePgx, migrateSQLit}
	for _, tc := range []struct {
		pkg            string
		banned, needed []string
	}{
		{pkg: "", banned: neither}, // the root package: balde.Open
		{pkg: "throttle/sqlstore", banned: neither},
		{pkg: "migrations", banned: neither},
		{pkg: "dict/dictsql", banned: neither},
		{pkg: "sifen/sifensql", banned: neither},
		{pkg: "web", banned: neither},
		{pkg: "throttle/sqlstore/sqlitedriver", banned: []string{pgx, migratePgx}, needed: []string{sqlite, migrateSQLit}},
		{pkg: "throttle/sqlstore/pgxdriver", banned: []string{sqlite, migrateSQLit}, needed: []string{pgx, migratePgx}},
		{pkg: "throttle/sqlstore/testdata/sqliteonly", banned: []string{pgx, migratePgx}, needed: []string{sqlite}},
		{pkg: "throttle/sqlstore/testdata/postgresonly", banned: []string{sqlite, migrateSQLit}, needed: []string{pgx}},
		{pkg: "throttle/sqlstore/testdata/baldesqlite", banned: []string{pgx, migratePgx}, needed: []string{sqlite}},
		{pkg: "throttle/sqlstore/testdata/baldepostgres", banned: []string{sqlite, migrateSQLit}, needed: []string{pgx}},
		{pkg: "internal/alldrivers", needed: []string{pgx, sqlite}},
	} {
		t.Run(strings.ReplaceAll(cmp.Or(tc.pkg, "balde"), "/", "_"), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, "go", "list", "-deps", strings.TrimSuffix(mod+tc.pkg, "/")).CombinedOutput()
			require.NoError(t, err, "go list -deps %s: %s", tc.pkg, out)
			deps := strings.Fields(string(out))
			has := func(prefix string) []string {
				var found []string
				for _, p := range deps {
					if strings.HasPrefix(p, prefix) {
						found = append(found, p)
					}
				}
				return found
			}
			for _, b := range tc.banned {
				require.Empty(t, has(b), "%s links %s", tc.pkg, b)
			}
			for _, n := range tc.needed {
				require.NotEmpty(t, has(n), "%s does not link %s", tc.pkg, n)
			}
		})
	}
}

// TestOpenNeedsTheEnginesDriver: without a driver, or with another
// engine's, nothing is opened or created, and the error says which package
// to import.
func TestOpenNeedsTheEnginesDriver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "balde.db")
	dsn := "sqlite://" + path
	up := func(m *migrations.Migrator) error { return m.Up() }
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"OpenWithoutDriver", func() error {
			_, err := sqlstore.Open(ctx, dsn, sqlstore.Options{Migrate: true})
			return err
		}, "sqlitedriver"},
		{"OpenWithAnotherEnginesDriver", func() error {
			_, err := sqlstore.Open(ctx, dsn, sqlstore.Options{Migrate: true, Driver: pgxDriver(t)})
			return err
		}, "the database is sqlite but the Driver is postgres's"},
		{"MigrateWithoutDriver", func() error { return sqlstore.Migrate(ctx, dsn, nil, up) }, "sqlitedriver"},
		{"OpenDBWithoutDriver", func() error {
			db, err := sql.Open("sqlite", sqlstore.SQLiteDSN(path))
			require.NoError(t, err)
			defer db.Close()
			_, err = sqlstore.OpenDB(ctx, db, sqlstore.Options{Migrate: true})
			return err
		}, "sqlitedriver"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorContains(t, tc.run(), tc.want)
			_, err := os.Stat(path)
			require.ErrorIs(t, err, fs.ErrNotExist, "no database created")
		})
	}
}

// pipelineSpy is pgx's driver that counts its pipelined transactions, or
// declines every connection (ErrNoPipeline) when decline is set.
type pipelineSpy struct {
	sqlstore.Driver // pgx's
	runs            *atomic.Int64
	decline         bool
}

func (d pipelineSpy) Pipeline(ctx context.Context, conn *sql.Conn, p *driverkit.Pipeline) error {
	if d.decline {
		return driverkit.ErrNoPipeline
	}
	d.runs.Add(1)
	return d.Driver.(driverkit.Pipeliner).Pipeline(ctx, conn, p)
}

// TestUpdateRunsThroughThePipeliner: on PostgreSQL every decision is one
// pipelined transaction of the driver (decision 0035), and a driver that
// declines the connection leaves the decisions exactly as they were, taken
// on the database/sql path.
func TestUpdateRunsThroughThePipeliner(t *testing.T) {
	dsn := sqlstoretest.DSN(t, sqlstore.Postgres)
	for _, tc := range []struct {
		name     string
		decline  bool
		wantRuns int64
	}{
		{name: "Pipelined", wantRuns: 3},
		{name: "Declined", decline: true, wantRuns: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			clock := throttle.NewManualClock(time.Date(2026, 1, 2, 13, 0, 0, 0, time.UTC))
			spy := pipelineSpy{Driver: pgxDriver(t), runs: new(atomic.Int64), decline: tc.decline}
			store, err := sqlstore.Open(ctx, dsn, sqlstore.Options{Driver: spy, Clock: clock.Now})
			require.NoError(t, err)
			defer store.Close()
			sms := throttle.PerMinute("SMS_PROVIDER", 2, 2)
			lim, err := throttle.NewLimiter(store, throttle.Policies{sms.Name: sms}, throttle.Config{Clock: clock.Now})
			require.NoError(t, err)
			key := throttle.Key{Policy: sms.Name, Env: "prod", Identifier: "pipeline-" + tc.name}
			var allowed []bool
			for range 3 {
				d, err := lim.Take(ctx, "", throttle.Charge{Key: key, Cost: 1})
				require.NoError(t, err)
				allowed = append(allowed, d.Allowed)
			}
			require.Equal(t, []bool{true, true, false}, allowed, "two a minute")
			require.Equal(t, tc.wantRuns, spy.runs.Load(), "pipelined transactions")
		})
	}
}

// TestBaldeOpenNamesTheMissingDriver: balde.Open on an engine whose driver
// the program did not import opens nothing and says which package to
// import (a program on SQLite alone, given a PostgreSQL DSN).
func TestBaldeOpenNamesTheMissingDriver(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("SKIPPED: the go command is not on PATH; cannot build the program")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "run", "./testdata/baldesqlite", "postgres://nobody@127.0.0.1:1/none").CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), `balde: DB: sqlstore: no driver for postgres: import _ "github.com/balde-throttle/balde/throttle/sqlstore/pgxdriver"`)
}

// pgxDriver is the registered PostgreSQL Driver (importing pgxdriver
// registers it).
func pgxDriver(tb testing.TB) sqlstore.Driver {
	tb.Helper()
	d, err := sqlstore.DriverOf(sqlstore.Postgres)
	require.NoError(tb, err)
	return d
}
