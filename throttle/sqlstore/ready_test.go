package sqlstore_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/alldrivers"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// TestCheckWriteFailsWhenWritesFail is issue 13's /healthz that said 200
// while every write failed: the database answers reads (Ping) but refuses
// writes, and CheckWrite says so.
func TestCheckWriteFailsWhenWritesFail(t *testing.T) {
	ctx := context.Background()
	dsn := sqlstoretest.DSN(t, sqlstore.SQLite)
	require.NoError(t, sqlstoretest.MustOpenDSN(t, dsn, nil).CheckWrite(ctx), "a writable database")

	// query_only: every connection of the store refuses writes, as on a
	// read-only file (the tests run as root, for whom chmod does not).
	ro := sqlstoretest.MustOpenDSN(t, dsn+"?_pragma=query_only(1)", nil)
	require.NoError(t, ro.Ping(ctx), "reads still work")
	err := ro.CheckWrite(ctx)
	require.ErrorIs(t, err, throttle.ErrStoreUnavailable)
	require.ErrorContains(t, err, "readonly")
}

// TestDeletedSQLiteFileIsDetected is issue 13's database file deleted under
// serve: SQLite keeps writing to the unlinked file and every request
// succeeded. CheckIdentity and CheckWrite now fail, and a store opened
// again on the path refuses to create a new, empty database there.
func TestDeletedSQLiteFileIsDetected(t *testing.T) {
	ctx := context.Background()
	dsn := sqlstoretest.DSN(t, sqlstore.SQLite)
	path := strings.TrimPrefix(dsn, "sqlite://")
	store := sqlstoretest.MustOpenDSN(t, dsn, nil)
	id := store.Identity()
	require.Equal(t, path, id.Path)
	require.NotZero(t, id.Inode)
	require.Contains(t, id.String(), "sqlite file "+path)
	require.NoError(t, store.CheckIdentity())

	for _, suffix := range []string{"", "-wal", "-shm"} {
		require.NoError(t, os.Remove(path+suffix))
	}
	err := store.CheckIdentity()
	require.ErrorIs(t, err, sqlstore.ErrDatabaseReplaced)
	require.ErrorIs(t, err, throttle.ErrStoreUnavailable)
	require.ErrorIs(t, store.CheckWrite(ctx), sqlstore.ErrDatabaseReplaced)

	_, err = alldrivers.Open(ctx, dsn, sqlstore.Options{})
	require.Error(t, err)
	require.NoFileExists(t, path, "Open must not create a database where one was")

	// Another file moved to the path is detected too.
	other := sqlstoretest.DSN(t, sqlstore.SQLite)
	require.NoError(t, os.Rename(strings.TrimPrefix(other, "sqlite://"), path))
	require.ErrorIs(t, store.CheckIdentity(), sqlstore.ErrDatabaseReplaced)
}

// TestOpenRefusesAMissingFile: without Migrate, Open on a path with no
// database fails instead of creating an empty file.
func TestOpenRefusesAMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.db")
	_, err := alldrivers.Open(context.Background(), "sqlite://"+path, sqlstore.Options{})
	require.Error(t, err)
	require.NoFileExists(t, path)
}

// TestCheckWriteSurvivesAConnectionReset is issue 13's /healthz that said
// 503 eleven times in a row after one reset of pooled PostgreSQL
// connections: CheckWrite retries once on a fresh connection.
func TestCheckWriteSurvivesAConnectionReset(t *testing.T) {
	ctx := context.Background()
	dsn := sqlstoretest.DSN(t, sqlstore.Postgres)
	app := "balde_ready_" + strings.ReplaceAll(t.Name(), "/", "_")
	store := sqlstoretest.MustOpenDSN(t, sqlstoretest.WithApplicationName(t, dsn, app), nil)
	require.NoError(t, store.CheckWrite(ctx))
	require.Contains(t, store.Identity().String(), "postgres database test schema t_")
	for round := range 11 {
		require.Positive(t, sqlstoretest.TerminateSessions(t, app), "round %d", round)
		require.NoError(t, store.CheckWrite(ctx), "round %d", round)
	}
}
