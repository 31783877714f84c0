package sqlstore_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/alldrivers"
)

// fileSum is the SHA-256 of the file at path: "untouched" means the same sum.
func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(b)
}

// CorruptCopy returns a copy of a migrated balde database holding some
// data, with 200 random bytes written over the start of one of its data
// pages (issue 23's test).
func corruptCopy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	sound := filepath.Join(dir, "sound.db")
	s, err := alldrivers.Open(context.Background(), "sqlite://"+sound, sqlstore.Options{Migrate: true})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	db, err := sql.Open("sqlite", "file:"+sound)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE filler (x BLOB)`)
	require.NoError(t, err)
	_, err = db.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
		INSERT INTO filler SELECT randomblob(100) FROM n`)
	require.NoError(t, err)
	require.NoError(t, db.Close()) // checkpoints the WAL into the file

	b, err := os.ReadFile(sound)
	require.NoError(t, err)
	const page = 4096
	require.Greater(t, len(b), 20*page)
	at := (len(b)/page - 5) * page // a page of filler's, near the end
	r := rand.New(rand.NewPCG(23, 3))
	for i := range 200 {
		b[at+i] = byte(r.Uint32())
	}
	bad := filepath.Join(dir, "copy.db")
	require.NoError(t, os.WriteFile(bad, b, 0o644))
	return bad
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
		{name: "ErrCorruptFile", wantErr: sqlstore.ErrDatabaseCorrupt, file: corruptCopy},
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
	path := corruptCopy(t)
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
