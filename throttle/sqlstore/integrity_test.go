package sqlstore_test

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"

	"github.com/balde-throttle/balde/internal/alldrivers"
	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// fileSum is the SHA-256 of the file at path: "untouched" means the same sum.
func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(b)
}

// TestOpenRefusesABadFile checks that an empty (0-byte) file and a file
// with 200 random bytes in a data page are refused by Open (with and
// without migrations) and by Migrate, with ErrDatabaseRefused and
// throttle.ErrStoreUnavailable and a message naming the file, and that the
// file is left untouched. Before issue 23 the empty file became a new,
// empty database and the corrupt one was opened.
func TestOpenRefusesABadFile(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		file    func(t *testing.T) string
		wantErr error
	}{
		{name: "ErrEmptyFile", wantErr: sqlstore.ErrDatabaseRefused, file: func(t *testing.T) string {
			path := filepath.Join(t.TempDir(), "balde.db")
			require.NoError(t, os.WriteFile(path, nil, 0o644))
			return path
		}},
		{name: "ErrCorruptFile", wantErr: sqlstore.ErrDatabaseCorrupt, file: sqlstoretest.CorruptSQLiteCopy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.file(t)
			before := fileSum(t, path)
			for _, open := range []struct {
				name string
				run  func() error
			}{
				{"OpenMigrate", func() error {
					_, err := alldrivers.Open(ctx, "sqlite://"+path, sqlstore.Options{Migrate: true})
					return err
				}},
				{"Open", func() error {
					_, err := alldrivers.Open(ctx, "sqlite://"+path, sqlstore.Options{})
					return err
				}},
				{"MigrateVersion", func() error {
					return alldrivers.Migrate(ctx, "sqlite://"+path, func(m *migrations.Migrator) error { _, _, err := m.Version(); return err })
				}},
			} {
				err := open.run()
				require.ErrorIs(t, err, tc.wantErr, open.name)
				require.ErrorIs(t, err, sqlstore.ErrDatabaseRefused, open.name)
				require.ErrorIs(t, err, throttle.ErrStoreUnavailable, open.name)
				require.ErrorContains(t, err, path, open.name)
				require.Equal(t, before, fileSum(t, path), "%s changed the file", open.name)
			}
		})
	}
}

// TestCorruptionFoundWhileOpenRefusesEverything opens a corrupt copy
// without the check at open, and checks that the readiness probe's
// background check finds it (CheckWrite fails with ErrDatabaseCorrupt
// within a deadline) and that the store then refuses decisions and Retry.
func TestCorruptionFoundWhileOpenRefusesEverything(t *testing.T) {
	ctx := context.Background()
	path := sqlstoretest.CorruptSQLiteCopy(t)
	s, err := alldrivers.Open(ctx, "sqlite://"+path, sqlstore.Options{IntegrityTimeout: -1, IntegrityEvery: time.Nanosecond})
	require.NoError(t, err)
	defer s.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err = s.CheckWrite(ctx)
		if err != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.ErrorIs(t, err, sqlstore.ErrDatabaseCorrupt, "readiness within 10 s")
	require.ErrorIs(t, err, throttle.ErrStoreUnavailable)

	err = s.Update(ctx, []throttle.Key{{Identifier: "x", Env: "test", Policy: "P"}}, nil, func(*throttle.Tx) error { return nil })
	require.ErrorIs(t, err, sqlstore.ErrDatabaseCorrupt, "a decision")
	ran := false
	err = s.Retry(ctx, "read documents", func() error { ran = true; return nil })
	require.ErrorIs(t, err, sqlstore.ErrDatabaseCorrupt, "Retry")
	require.False(t, ran, "Retry ran on a corrupt file")
	require.ErrorIs(t, s.CheckIntegrity(ctx), sqlstore.ErrDatabaseCorrupt)
}
