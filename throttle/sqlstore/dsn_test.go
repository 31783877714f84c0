package sqlstore_test

import (
	"context"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/alldrivers"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
)

func TestParseDSN(t *testing.T) {
	const pragmas = "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)" +
		"&_pragma=wal_autocheckpoint(16000)&_pragma=journal_size_limit(67108864)"
	tests := []struct {
		name, dsn  string
		wantEngine sqlstore.Engine
		wantDriver string
	}{
		{"SQLiteScheme", "sqlite://balde.db", sqlstore.SQLite, "file:balde.db?" + pragmas},
		{"SQLiteAbsolute", "sqlite:///var/lib/balde/balde.db", sqlstore.SQLite, "file:/var/lib/balde/balde.db?" + pragmas},
		{"Path", "data/balde.db", sqlstore.SQLite, "file:data/balde.db?" + pragmas},
		{"FileURI", "file:x.db?cache=shared", sqlstore.SQLite, "file:x.db?" + pragmas + "&cache=shared"},
		{"UserPragmaWins", "sqlite://x.db?_pragma=synchronous(FULL)", sqlstore.SQLite,
			"file:x.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=wal_autocheckpoint(16000)&_pragma=journal_size_limit(67108864)&_pragma=synchronous(FULL)"},
		{"Postgres", "postgres://u@127.0.0.1:5432/db?sslmode=disable", sqlstore.Postgres, "postgres://u@127.0.0.1:5432/db?lock_timeout=5s&plan_cache_mode=force_generic_plan&sslmode=disable&statement_timeout=30s"},
		{"PostgreSQLScheme", "postgresql://u@h/db", sqlstore.Postgres, "postgresql://u@h/db?lock_timeout=5s&plan_cache_mode=force_generic_plan&statement_timeout=30s"},
		{"PostgresPlanModeKept", "postgres://u@h/db?plan_cache_mode=auto", sqlstore.Postgres, "postgres://u@h/db?lock_timeout=5s&plan_cache_mode=auto&statement_timeout=30s"},
		{"PostgresTimeoutsKept", "postgres://u@h/db?lock_timeout=1s&statement_timeout=0", sqlstore.Postgres, "postgres://u@h/db?lock_timeout=1s&plan_cache_mode=force_generic_plan&statement_timeout=0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			engine, driver, err := sqlstore.ParseDSN(tt.dsn)
			require.NoError(t, err)
			require.Equal(t, tt.wantEngine, engine)
			require.Equal(t, tt.wantDriver, driver)
		})
	}
	for _, bad := range []string{"", "mysql://x", "sqlite://", "sqlite://?x=1"} {
		t.Run("Error"+bad, func(t *testing.T) {
			_, _, err := sqlstore.ParseDSN(bad)
			require.Error(t, err)
		})
	}
}

// TestOpenUnmigrated: opening a database that was never migrated, without
// Migrate, is an error naming the likely cause, not a panic.
func TestOpenUnmigrated(t *testing.T) {
	_, err := alldrivers.Open(context.Background(), "sqlite://"+t.TempDir()+"/empty.db", sqlstore.Options{})
	require.ErrorIs(t, err, throttle.ErrStoreUnavailable)
	require.ErrorContains(t, err, "is the database migrated?")
}

// TestPageCacheInDSN: SQLite's page cache and memory map (default: 2 MB
// per connection, none) are set in the DSN, and reach both the store's
// write connection and its read pool (decision 0119).
func TestPageCacheInDSN(t *testing.T) {
	ctx := context.Background()
	dsn := "sqlite://" + t.TempDir() + "/cache.db"
	require.NoError(t, alldrivers.Migrate(ctx, dsn, upMigrations))
	tests := []struct {
		name, params        string
		wantCache, wantMmap int64
	}{
		{"Default", "", -2000, 0},
		{"Set", "?_pragma=cache_size(-65536)&_pragma=mmap_size(268435456)", -65536, 268435456},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := alldrivers.Open(ctx, dsn+tt.params, sqlstore.Options{})
			require.NoError(t, err)
			defer s.Close()
			for _, db := range []*sqlx.DB{s.DB(), s.ReadDB()} {
				var cache, mmap int64
				require.NoError(t, db.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&cache))
				require.NoError(t, db.QueryRowContext(ctx, `PRAGMA mmap_size`).Scan(&mmap))
				require.Equal(t, tt.wantCache, cache)
				require.Equal(t, tt.wantMmap, mmap)
			}
		})
	}
}
